//! Capability credentials on the client (docs/security.md): the metadata server hands one
//! capability and capability key per data object with every layout; the OSD sessions sign each
//! command with the credential of the object it addresses.
//!
//! - [`CredentialBook`]: one per OSD, shared by that OSD's sessions (it is their
//!   [`CredentialSource`]): object id -> credential, counted by the open files that use it.
//! - [`FileGrant`]: an open file's credentials and when to refresh them. A grant is refreshed
//!   (a new GetLayout) once three quarters of its lifetime have passed, and once more when an OSD
//!   refuses the capability (a revocation or a rotated key), so callers never see an expiry.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use tessera_initiator::osd_client::{object_of, CredentialSource, OsdError};
use tessera_mds_proto::{FileLayout, ObjectCredential};
use tessera_osd_proto::Command;
use tessera_scsi::SenseKey;
use tessera_osd_proto::cdb::CAPABILITY;
use tessera_security::capability::{CAPABILITY_LEN, PERMISSIONS, PERMISSIONS_LEN};
use tessera_security::clock::now_ms;
use tessera_security::{Capability, CapabilityError, Credential, Key};

use crate::error::ClientError;

struct Entry {
    credential: Arc<Credential>,
    /// Open files holding this object.
    users: usize,
}

/// The credentials of one OSD's objects that open files hold.
#[derive(Default)]
pub struct CredentialBook {
    entries: RwLock<HashMap<u64, Entry>>,
}

impl CredentialBook {
    fn hold(&self, object_id: u64, credential: Arc<Credential>) {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        entries.entry(object_id).and_modify(|e| {
            e.credential = credential.clone();
            e.users += 1;
        }).or_insert(Entry { credential, users: 1 });
    }

    /// A newer credential for an object already held (a refresh).
    fn replace(&self, object_id: u64, credential: Arc<Credential>) {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.get_mut(&object_id) {
            e.credential = credential;
        }
    }

    fn release(&self, object_id: u64) {
        let mut entries = self.entries.write().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = entries.get_mut(&object_id) {
            e.users -= 1;
            if e.users == 0 {
                entries.remove(&object_id);
            }
        }
    }

    /// Objects with a credential (for tests and diagnostics).
    pub fn len(&self) -> usize {
        self.entries.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl CredentialSource for CredentialBook {
    /// The credential of the object `command` addresses; `None` (a NOSEC command) for an object
    /// no open file holds, which a secure OSD refuses.
    fn credential(&self, command: &Command) -> Option<Arc<Credential>> {
        let (_, object_id) = object_of(command);
        self.entries.read().unwrap_or_else(|p| p.into_inner()).get(&object_id).map(|e| e.credential.clone())
    }
}

/// Decodes the credentials of a layout's objects, checking each names the object it is for.
pub fn decode_grant(layout: &FileLayout, grant: &[ObjectCredential], path: &str) -> Result<Vec<Arc<Credential>>, ClientError> {
    let bad = |reason: String| ClientError::Grant { path: path.to_string(), reason };
    grant
        .iter()
        .zip(&layout.objects)
        .map(|(c, o)| {
            let capability = Capability::decode(&c.capability).map_err(|e: CapabilityError| bad(format!("capability for object {:#x}: {e}", o.object_id)))?;
            if capability.object_id != o.object_id {
                return Err(bad(format!("capability names object {:#x}, the layout {:#x}", capability.object_id, o.object_id)));
            }
            Ok(Arc::new(Credential::new(capability, &Key(c.key))))
        })
        .collect()
}

/// An open file's credentials, registered in the books of its objects' OSDs until dropped.
pub struct FileGrant {
    books: Vec<Arc<CredentialBook>>,
    objects: Vec<(u32, u64)>,
    received_ms: u64,
    expires_ms: u64,
}

impl FileGrant {
    /// Registers `credentials` (slot order, as [`decode_grant`] returns them) in `books`
    /// (indexed by OSD). An empty list is a NOSEC file: nothing to hold or refresh.
    pub fn hold(books: &[Arc<CredentialBook>], layout: &FileLayout, credentials: Vec<Arc<Credential>>) -> FileGrant {
        let mut grant = FileGrant { books: Vec::new(), objects: Vec::new(), received_ms: now_ms(), expires_ms: u64::MAX };
        for (o, credential) in layout.objects.iter().zip(credentials) {
            let Some(book) = books.get(o.osd as usize) else { continue };
            grant.expires_ms = grant.expires_ms.min(expiry(&credential));
            book.hold(o.object_id, credential);
            grant.books.push(book.clone());
            grant.objects.push((o.osd, o.object_id));
        }
        grant
    }

    pub fn is_secure(&self) -> bool {
        !self.objects.is_empty()
    }

    /// Whether three quarters of the grant's lifetime have passed.
    pub fn due(&self, now_ms: u64) -> bool {
        self.is_secure() && now_ms >= self.received_ms + self.expires_ms.saturating_sub(self.received_ms) / 4 * 3
    }

    /// Installs fresher credentials for the same objects.
    pub fn renew(&mut self, credentials: Vec<Arc<Credential>>) {
        self.received_ms = now_ms();
        self.expires_ms = u64::MAX;
        for ((book, (_, object_id)), credential) in self.books.iter().zip(&self.objects).zip(credentials) {
            self.expires_ms = self.expires_ms.min(expiry(&credential));
            book.replace(*object_id, credential);
        }
    }
}

impl Drop for FileGrant {
    fn drop(&mut self) {
        for (book, (_, object_id)) in self.books.iter().zip(&self.objects) {
            book.release(*object_id);
        }
    }
}

fn expiry(credential: &Credential) -> u64 {
    match credential.capability().expires_ms {
        0 => u64::MAX,
        t => t,
    }
}

/// Whether an OSD refused a command for lack of permission bits in its capability (the
/// file's mode does not allow it).
pub fn is_permission_refusal(error: &ClientError) -> bool {
    refused_field(error).is_some_and(|f| (PERMISSIONS..PERMISSIONS + PERMISSIONS_LEN).contains(&f))
}

/// The capability byte an OSD's INVALID FIELD IN CDB points at, if it points into the capability.
fn refused_field(error: &ClientError) -> Option<usize> {
    let ClientError::Osd { source, .. } = error else { return None };
    let OsdError::Sense { sense, .. } = source.as_ref() else { return None };
    if sense.key != SenseKey::IllegalRequest || sense.asc_ascq() != 0x2400 {
        return None;
    }
    let f = sense.field_pointer.filter(|f| f.in_cdb)?;
    (CAPABILITY..CAPABILITY + CAPABILITY_LEN).contains(&(f.byte as usize)).then(|| f.byte as usize - CAPABILITY)
}

/// Whether an OSD refused a command because of its capability: ILLEGAL REQUEST, INVALID FIELD
/// IN CDB with the field pointer inside the capability (expired, revoked policy tag, stale key
/// version, missing permission). A fresh grant may cure it; other errors it cannot.
pub fn is_capability_refusal(error: &ClientError) -> bool {
    refused_field(error).is_some()
}

/// CDB byte of the user object id (OSD-2 r05 §5.2.1): where an OSD points when the object
/// does not exist.
const CDB_OBJECT_ID: u16 = 24;

/// Whether an OSD refused a command because its object does not exist (INVALID FIELD IN CDB
/// at the object id): the file was removed, or its objects were lost.
pub fn is_missing_object(error: &ClientError) -> bool {
    let ClientError::Osd { source, .. } = error else { return false };
    let OsdError::Sense { sense, .. } = source.as_ref() else { return false };
    sense.key == SenseKey::IllegalRequest
        && sense.asc_ascq() == 0x2400
        && sense.field_pointer.is_some_and(|f| f.in_cdb && f.byte == CDB_OBJECT_ID)
}
