//! Test helpers: an engine in a temp dir, and one-line builders for the requests tests send.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

use tempfile::TempDir;
use tessera_engine::{CommandError, Engine, EngineConfig};
use tessera_osd_proto::{
    AttrId, Attribute, Command, DataLayout, GetAttrs, Options, Reply, Request, RetrievedAttr, TimestampsControl,
};
use tessera_types::ObjectAddr;

pub const PID: u64 = 0x10000;
pub const CURRENT: u32 = 0xFFFF_FFFE;
pub const APP_PAGE: u32 = 0x1_0000;

pub struct Osd {
    pub engine: Engine,
    pub dir: TempDir,
    pub clock: AtomicU64,
}

pub fn config() -> EngineConfig {
    EngineConfig { capacity_bytes: Some(1 << 40), system_id: Some([7; 20]), access_time_granularity_ms: 0, ..Default::default() }
}

impl Osd {
    pub fn new() -> Osd {
        let dir = tempfile::tempdir().expect("temp dir");
        let engine = Engine::open(dir.path(), config()).expect("open engine");
        Osd { engine, dir, clock: AtomicU64::new(1_700_000_000_000) }
    }

    /// Drops the engine and opens the same directory again.
    pub fn reopen(self) -> Osd {
        let Osd { engine, dir, clock } = self;
        drop(engine);
        let engine = Engine::open(dir.path(), config()).expect("reopen engine");
        Osd { engine, dir, clock }
    }

    pub fn now(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub fn run(&self, r: &Request<'_>) -> Result<Reply, CommandError> {
        self.engine.execute(r, self.now())
    }

    pub fn ok(&self, r: &Request<'_>) -> Reply {
        self.run(r).unwrap_or_else(|e| panic!("{:?} failed: {e} ({})", r.command, e.sense()))
    }

    pub fn partition(&self) -> u64 {
        let reply = self.ok(&req(Command::CreatePartition { requested: Some(PID) }));
        assert!(reply.retrieved.is_empty());
        PID
    }

    /// Creates one user object and returns its id (from the Current Command page).
    pub fn create(&self, pid: u64) -> u64 {
        let r = with_get(req(Command::Create { partition_id: pid, requested: None, count: 1 }), &[AttrId::new(CURRENT, 4)]);
        be(&self.ok(&r).retrieved[0])
    }

    pub fn write(&self, addr: ObjectAddr, offset: u64, data: &[u8]) -> Reply {
        self.ok(&Request { data, ..req(Command::Write { addr, offset, len: data.len() as u64, layout: DataLayout::Contiguous }) })
    }

    pub fn read(&self, addr: ObjectAddr, offset: u64, len: u64) -> Reply {
        self.ok(&req(Command::Read { addr, offset, len, layout: DataLayout::Contiguous }))
    }

    pub fn get(&self, addr: ObjectAddr, ids: &[AttrId]) -> Vec<RetrievedAttr> {
        self.ok(&with_get(req(Command::GetAttributes { addr }), ids)).retrieved
    }

    pub fn get1(&self, addr: ObjectAddr, page: u32, number: u32) -> Option<Vec<u8>> {
        self.get(addr, &[AttrId::new(page, number)]).remove(0).value
    }

    pub fn set(&self, addr: ObjectAddr, page: u32, number: u32, value: &[u8]) -> Result<Reply, CommandError> {
        self.run(&with_set(req(Command::SetAttributes { addr }), &[(page, number, value)]))
    }
}

pub fn req(command: Command) -> Request<'static> {
    Request {
        service_action: command.service_action(),
        options: Options::default(),
        timestamps: TimestampsControl::Update,
        command,
        set_attrs: Vec::new(),
        get_attrs: GetAttrs::None,
        data: &[],
    }
}

pub fn with_get<'a>(mut r: Request<'a>, ids: &[AttrId]) -> Request<'a> {
    r.get_attrs = GetAttrs::List { ids: ids.to_vec(), allocation_len: 1 << 16 };
    r
}

pub fn with_set<'a>(mut r: Request<'a>, sets: &[(u32, u32, &[u8])]) -> Request<'a> {
    r.set_attrs = sets.iter().map(|(p, n, v)| Attribute { id: AttrId::new(*p, *n), value: v.to_vec() }).collect();
    r
}

/// A retrieved value as a big-endian integer (1..8 bytes).
pub fn be(a: &RetrievedAttr) -> u64 {
    let v = a.value.as_ref().unwrap_or_else(|| panic!("{:?} undefined", a.id));
    v.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64)
}

pub fn be_bytes(v: &[u8]) -> u64 {
    v.iter().fold(0u64, |acc, b| (acc << 8) | *b as u64)
}
