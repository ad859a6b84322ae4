//! Which caller a connection's requests are answered for. Without a user key the server
//! believes the caller each frame names (AUTH_SYS-like). With one, a connection's first request
//! must be `Authenticate` with a proof made under that key (`tessera_mds_proto::identity`), and
//! every later frame must name the caller it proved: a client cannot switch users mid-stream.

use tessera_mds_proto::identity::now_ms;
use tessera_mds_proto::{Caller, FsError, Reply, Request, UserKey};

/// What to do with one request frame.
#[derive(Debug, PartialEq)]
pub enum Admission {
    /// Answer this without running anything.
    Answer(Result<Reply, FsError>),
    /// Run the request for this caller.
    Run(Caller, Request),
}

/// Admits `request`, sent as `caller` on a connection that has proven `proven` so far (updated
/// by an `Authenticate`).
pub fn admit(key: Option<&UserKey>, proven: &mut Option<Caller>, caller: Caller, request: Request) -> Admission {
    let Some(key) = key else {
        return match request {
            // Nothing to prove to a server that believes its callers.
            Request::Authenticate { .. } => Admission::Answer(Ok(Reply::Done)),
            request => Admission::Run(caller, request),
        };
    };
    match request {
        Request::Authenticate { proof } => match key.verify(&proof, now_ms()) {
            Ok(who) => {
                *proven = Some(who);
                Admission::Answer(Ok(Reply::Done))
            }
            Err(e) => {
                tracing::warn!(uid = proof.caller.uid, error = %e, "refused a user proof");
                Admission::Answer(Err(FsError::NotPermitted))
            }
        },
        request => match proven {
            Some(who) if *who == caller => Admission::Run(caller, request),
            Some(who) => {
                tracing::warn!(proven = who.uid, claimed = caller.uid, "a connection claimed another caller than it proved");
                Admission::Answer(Err(FsError::NotPermitted))
            }
            None => {
                tracing::debug!(uid = caller.uid, "a request before any proof, on a server that proves users");
                Admission::Answer(Err(FsError::NotPermitted))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_mds_proto::identity::USER_KEY_LEN;

    #[test]
    fn a_connection_is_answered_only_for_the_caller_it_proved() {
        let key = UserKey::from_bytes(&[9; USER_KEY_LEN]);
        let alice = Caller::user(1000, 1000);
        let mut proven = None;
        let stat = || Request::StatFs;
        assert_eq!(admit(Some(&key), &mut proven, alice.clone(), stat()), Admission::Answer(Err(FsError::NotPermitted)), "no proof yet");
        let forged = UserKey::from_bytes(&[8; USER_KEY_LEN]).prove(&Caller::ROOT, now_ms(), 1);
        assert_eq!(admit(Some(&key), &mut proven, Caller::ROOT, Request::Authenticate { proof: forged }), Admission::Answer(Err(FsError::NotPermitted)));
        assert_eq!(proven, None);
        let proof = key.prove(&alice, now_ms(), 2);
        assert_eq!(admit(Some(&key), &mut proven, alice.clone(), Request::Authenticate { proof }), Admission::Answer(Ok(Reply::Done)));
        assert_eq!(admit(Some(&key), &mut proven, alice.clone(), stat()), Admission::Run(alice.clone(), stat()));
        assert_eq!(admit(Some(&key), &mut proven, Caller::ROOT, stat()), Admission::Answer(Err(FsError::NotPermitted)), "no switching users");
        let with_group = Caller { groups: vec![0], ..alice };
        assert_eq!(admit(Some(&key), &mut proven, with_group, stat()), Admission::Answer(Err(FsError::NotPermitted)), "nor groups");
        assert_eq!(admit(None, &mut None, Caller::ROOT, stat()), Admission::Run(Caller::ROOT, stat()), "without a key callers are believed");
    }
}
