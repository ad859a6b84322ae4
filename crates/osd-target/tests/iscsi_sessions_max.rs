//! Goal: a target serves at most `TargetConfig::sessions_max` normal sessions; a login past it
//! is refused with "out of resources" (RFC 7143 §11.13.5, status 0x0302), which the initiator
//! reports in words a person can act on, and a session that ends frees its place. Discovery
//! sessions do not count.
//!
//! Method: a real target on loopback with a cap of three, real initiator logins.

mod common;

use tessera_initiator::iscsi::{Session, SessionConfig};
use tessera_scsi::TransportError;

const TARGET: &str = "iqn.2026-11.org.tessera.test:capped";
const INITIATOR: &str = "iqn.2026-11.org.tessera.test:client";

#[test]
fn a_login_past_the_session_cap_is_refused_as_out_of_resources_until_one_ends() {
    let target = common::OsdTarget::start_with(TARGET, |c| c.sessions_max = 3);
    let login = || Session::login(target.addr, SessionConfig::new(INITIATOR, TARGET));
    let mut sessions: Vec<Session> = (0..3).map(|i| login().unwrap_or_else(|e| panic!("login {i} within the cap: {e}"))).collect();

    let refused = login().err().expect("a fourth session is past the cap");
    assert!(matches!(refused, TransportError::LoginRefused { .. }), "{refused:?}");
    let message = refused.to_string();
    assert!(message.contains("out of resources (status 0x0302)") && message.contains("file descriptor limit"), "{message}");

    // Discovery is not a normal session: it still answers.
    let found = Session::discover(target.addr, INITIATOR).expect("discovery at the cap");
    assert!(found.iter().any(|t| t.name == TARGET), "{found:?}");

    sessions.pop().unwrap().logout().expect("logging one session out");
    let again = login();
    assert!(again.is_ok(), "a login once a session ended: {:?}", again.err());
}
