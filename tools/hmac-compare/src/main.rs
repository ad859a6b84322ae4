//! HMAC-SHA256 with the key's pads hashed once (as `tessera_security::icv::CapabilityKey` keeps
//! them), per message, on this machine: `ring` (what Tessera links), OpenSSL's SHA-256 through
//! the `openssl` crate (keyed inner and outer states cloned per message), and RustCrypto
//! `sha2` + `hmac` (built with `--features asm` for its assembly block function).
//!
//! Inputs: the 236-byte CDB (request ICV), the response ICV's 39-byte input, 8 KiB (ALLDATA).
//! Rounds interleave the implementations and rotate which goes first; printed: medians and
//! minima over rounds, ns per HMAC, and the ratio ring / other (above 1: the other is faster).
//!
//! ```sh
//! cargo run --release -- [rounds] [cold]      # cold: an 8 MiB sweep before each HMAC
//! cargo run --release -- only-ring 2000       # one implementation alone, for callgrind
//! cargo run --release -- seal [KiB]           # response ICV right after the request ICV
//! ```
use std::hint::black_box;
use std::time::Instant;

use hmac::Mac;

const KEY: [u8; 32] = [0x5a; 32];

struct Ring(ring::hmac::Key);

impl Ring {
    fn new() -> Self {
        Ring(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &KEY))
    }

    fn mac(&self, m: &[u8]) -> [u8; 32] {
        let mut c = ring::hmac::Context::with_key(&self.0);
        c.update(m);
        let mut out = [0u8; 32];
        out.copy_from_slice(c.sign().as_ref());
        out
    }
}

/// RFC 2104 over OpenSSL's SHA-256: the pads hashed once, the states cloned per message.
struct Ossl {
    inner: openssl::sha::Sha256,
    outer: openssl::sha::Sha256,
}

impl Ossl {
    fn new() -> Self {
        let (mut ipad, mut opad) = ([0x36u8; 64], [0x5cu8; 64]);
        for k in 0..KEY.len() {
            ipad[k] ^= KEY[k];
            opad[k] ^= KEY[k];
        }
        let mut inner = openssl::sha::Sha256::new();
        inner.update(&ipad);
        let mut outer = openssl::sha::Sha256::new();
        outer.update(&opad);
        Ossl { inner, outer }
    }

    fn mac(&self, m: &[u8]) -> [u8; 32] {
        let mut i = self.inner.clone();
        i.update(m);
        let mut o = self.outer.clone();
        o.update(&i.finish());
        o.finish()
    }
}

struct RustCrypto(hmac::Hmac<sha2::Sha256>);

impl RustCrypto {
    fn new() -> Self {
        RustCrypto(hmac::Hmac::<sha2::Sha256>::new_from_slice(&KEY).expect("any key length"))
    }

    fn mac(&self, m: &[u8]) -> [u8; 32] {
        let mut c = self.0.clone();
        c.update(m);
        c.finalize().into_bytes().into()
    }
}

/// Mean ns per HMAC over `n` messages (each differing in its first 8 bytes); `sweep`: an
/// untimed pass over it before each HMAC.
fn time(n: usize, msg: &mut [u8], mut sweep: Option<&mut Vec<u8>>, f: &dyn Fn(&[u8]) -> [u8; 32]) -> f64 {
    let mut total = 0u128;
    for k in 0..n {
        if let Some(junk) = sweep.as_deref_mut() {
            for j in (0..junk.len()).step_by(64) {
                junk[j] = junk[j].wrapping_add(1);
            }
        }
        msg[..8].copy_from_slice(&(k as u64).to_be_bytes());
        let t = Instant::now();
        black_box(f(black_box(&msg[..])));
        total += t.elapsed().as_nanos();
    }
    total as f64 / n as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (r, o, c) = (Ring::new(), Ossl::new(), RustCrypto::new());
    // RFC 4231 test case 2 through each, and the three agree on a CDB-sized input.
    let jefe = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"Jefe").unwrap().chain_update(b"what do ya want for nothing?").finalize().into_bytes();
    assert_eq!(jefe[..4], [0x5b, 0xdc, 0xc1, 0x46]);
    let probe = [7u8; 236];
    assert_eq!(r.mac(&probe), o.mac(&probe));
    assert_eq!(r.mac(&probe), c.mac(&probe));
    let rustcrypto = if cfg!(feature = "asm") { "sha2+asm" } else { "sha2" };

    if let Some(which) = args.first().filter(|a| a.starts_with("only-")) {
        let n: usize = args.get(1).map_or(100_000, |a| a.parse().expect("a count"));
        let mut msg = [3u8; 236];
        let ns = match which.as_str() {
            "only-ring" => time(n, &mut msg, None, &|m| r.mac(m)),
            "only-openssl" => time(n, &mut msg, None, &|m| o.mac(m)),
            _ => time(n, &mut msg, None, &|m| c.mac(m)),
        };
        println!("{which}: {n} HMACs over 236 bytes, {ns:.0} ns each");
        return;
    }

    if args.first().map(String::as_str) == Some("seal") {
        // What computing the response ICV while the request ICV's code, tables and key state
        // are still in cache saves, against computing it after `kib` KiB of other work.
        let kib: usize = args.get(1).map_or(512, |a| a.parse().expect("KiB"));
        let mut junk = vec![0u8; kib << 10];
        let sweep = |junk: &mut Vec<u8>| {
            for j in (0..junk.len()).step_by(64) {
                junk[j] = junk[j].wrapping_add(1);
            }
        };
        let (mut cdb, rsp) = ([3u8; 236], [4u8; 39]);
        let (mut hot, mut later) = (Vec::new(), Vec::new());
        for k in 0..20_000u64 {
            cdb[..8].copy_from_slice(&k.to_be_bytes());
            sweep(&mut junk);
            black_box(r.mac(black_box(&cdb)));
            let t = Instant::now();
            black_box(r.mac(black_box(&rsp)));
            hot.push(t.elapsed().as_nanos() as f64);
            sweep(&mut junk);
            let t = Instant::now();
            black_box(r.mac(black_box(&rsp)));
            later.push(t.elapsed().as_nanos() as f64);
        }
        println!("response ICV (ring), medians: right after the request ICV {:.0} ns, after {kib} KiB of other work {:.0} ns", median(&mut hot), median(&mut later));
        return;
    }

    let rounds: usize = args.first().map_or(15, |a| a.parse().expect("rounds"));
    let cold = args.get(1).is_some_and(|a| a == "cold");
    let mut junk = vec![0u8; 8 << 20];
    for (name, len, n) in [("cdb236", 236usize, 4000usize), ("rsp39", 39, 8000), ("data8k", 8192, 100)] {
        let n = if cold { (n / 100).max(10) } else { n };
        let mut msg = vec![3u8; len];
        let mut t: [Vec<f64>; 3] = Default::default();
        for round in 0..rounds {
            for j in 0..3 {
                let which = (j + round) % 3;
                let sweep = if cold { Some(&mut junk) } else { None };
                let ns = match which {
                    0 => time(n, &mut msg, sweep, &|m| r.mac(m)),
                    1 => time(n, &mut msg, sweep, &|m| o.mac(m)),
                    _ => time(n, &mut msg, sweep, &|m| c.mac(m)),
                };
                t[which].push(ns);
            }
        }
        let [a, b, d] = &mut t;
        let (ma, mb, md) = (median(a), median(b), median(d));
        println!(
            "{} {name:7} ns/HMAC, median of {rounds}: ring {ma:6.0}  openssl {mb:6.0} ({:.2}x)  {rustcrypto} {md:6.0} ({:.2}x)  | min: ring {:.0} openssl {:.0} ({:.2}x) {rustcrypto} {:.0} ({:.2}x)",
            if cold { "cold" } else { "hot " },
            ma / mb, ma / md, a[0], b[0], a[0] / b[0], d[0], a[0] / d[0]
        );
    }
}
