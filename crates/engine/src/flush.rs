//! FLUSH, FLUSH COLLECTION, FLUSH PARTITION, FLUSH OSD: make data (fdatasync of the object
//! files, or syncfs for a whole partition or OSD) and attributes (a durable SQLite commit,
//! which fsyncs the WAL holding every earlier commit) durable before returning.

use tessera_osd_proto::{FlushScope, Reply};
use tessera_types::ObjectAddr;

use crate::db::attrs as stored;
use crate::engine::{reply, Cx, Engine};
use crate::error::CommandError;
use crate::object::ObjectKind;

impl Engine {
    pub(crate) fn flush(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, scope: FlushScope) -> Result<Reply, CommandError> {
        let _lock = self.locks.read(addr);
        self.db.read(|c| self.require(c, addr, &[ObjectKind::User]))?;
        if scope != FlushScope::AttributesOnly {
            self.data.sync(addr)?;
        }
        self.db.barrier()?;
        cx.current.object = Some((ObjectKind::User, addr));
        Ok(reply(self.finish_read(cx, addr, false)?))
    }

    pub(crate) fn flush_collection(&self, cx: &mut Cx<'_, '_>, addr: ObjectAddr, scope: FlushScope) -> Result<Reply, CommandError> {
        let members = self.db.read(|c| {
            self.require(c, addr, &[ObjectKind::Collection])?;
            Ok::<_, CommandError>(stored::members(c, addr.partition_id.0, addr.object_id.0, 0, u64::MAX)?)
        })?;
        if scope != FlushScope::AttributesOnly {
            for oid in members {
                self.data.sync(ObjectAddr::new(addr.partition_id.0, oid))?;
            }
        }
        self.db.barrier()?;
        cx.current.object = Some((ObjectKind::Collection, addr));
        Ok(reply(self.finish_read(cx, addr, false)?))
    }

    pub(crate) fn flush_partition(&self, cx: &mut Cx<'_, '_>, pid: u64, scope: FlushScope) -> Result<Reply, CommandError> {
        let addr = ObjectAddr::partition(pid);
        self.db.read(|c| self.require(c, addr, &[ObjectKind::Partition]))?;
        // syncfs covers the partition's files (and more): one system call instead of one
        // fdatasync per object.
        if scope != FlushScope::AttributesOnly {
            self.data.sync_all()?;
        }
        self.db.barrier()?;
        cx.current.object = Some((ObjectKind::Partition, addr));
        Ok(reply(self.finish_read(cx, addr, false)?))
    }

    pub(crate) fn flush_osd(&self, cx: &mut Cx<'_, '_>, scope: FlushScope) -> Result<Reply, CommandError> {
        if scope != FlushScope::AttributesOnly {
            self.data.sync_all()?;
        }
        self.db.barrier()?;
        cx.current.object = Some((ObjectKind::Root, ObjectAddr::ROOT));
        Ok(reply(self.finish_read(cx, ObjectAddr::ROOT, false)?))
    }
}
