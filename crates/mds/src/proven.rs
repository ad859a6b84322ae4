//! Which caller a connection's requests are answered for. Without a user key the server
//! believes the caller each frame names (AUTH_SYS-like). With one, a connection first asks for
//! a challenge, then proves its user with a proof made for that challenge under the key
//! (`tessera_mds_proto::identity`), and every later frame must name the caller it proved: a
//! client cannot switch users mid-stream, nor use a proof read off another connection. The
//! accepted proof also gives the key the connection is sealed under from its reply on
//! (`tessera_mds_proto::seal`), which the loop takes with [`Identity::take_session`].

use tessera_mds_proto::identity::Challenge;
use tessera_mds_proto::{Caller, FsError, Reply, Request, SessionKey, UserKey};

/// What one connection has shown of its user so far.
#[derive(Debug, Default)]
pub struct Identity {
    /// The challenge sent and not yet answered.
    challenge: Option<Challenge>,
    /// The caller proven.
    proven: Option<Caller>,
    /// The key to seal the connection under, once the proof's reply has left.
    session: Option<SessionKey>,
}

impl Identity {
    /// The session key a proof just gave, once: every frame after the proof's reply is sealed
    /// under it.
    pub fn take_session(&mut self) -> Option<SessionKey> {
        self.session.take()
    }
}

/// What to do with one request frame.
#[derive(Debug, PartialEq)]
pub enum Admission {
    /// Answer this without running anything.
    Answer(Result<Reply, FsError>),
    /// Run the request for this caller.
    Run(Caller, Request),
}

/// Admits `request`, sent as `caller` on a connection that has shown `identity` so far
/// (updated by `Challenge` and `Authenticate`).
pub fn admit(key: Option<&UserKey>, identity: &mut Identity, caller: Caller, request: Request) -> Admission {
    let Some(key) = key else {
        return match request {
            Request::Challenge => challenge(identity),
            // Nothing to prove to a server that believes its callers.
            Request::Authenticate { .. } => Admission::Answer(Ok(Reply::Done)),
            request => Admission::Run(caller, request),
        };
    };
    match request {
        Request::Challenge => challenge(identity),
        Request::Authenticate { proof } => {
            // A challenge answers one proof, good or bad.
            match key.verify(&proof, identity.challenge.take().as_ref()) {
                Ok(who) => {
                    identity.proven = Some(who);
                    identity.session = Some(key.session_key(&proof));
                    Admission::Answer(Ok(Reply::Sealed))
                }
                Err(e) => {
                    tracing::warn!(uid = proof.caller.uid, error = %e, "refused a user proof");
                    Admission::Answer(Err(FsError::NotPermitted))
                }
            }
        }
        request => match &identity.proven {
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

/// A fresh challenge for the connection, replacing any it had.
fn challenge(identity: &mut Identity) -> Admission {
    let mut challenge = Challenge::default();
    match getrandom::fill(&mut challenge) {
        Ok(()) => {
            identity.challenge = Some(challenge);
            Admission::Answer(Ok(Reply::Challenge(challenge)))
        }
        Err(e) => {
            tracing::error!(%e, "no randomness for a user challenge");
            Admission::Answer(Err(FsError::Io))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_mds_proto::identity::USER_KEY_LEN;

    fn challenge(key: Option<&UserKey>, identity: &mut Identity) -> Challenge {
        match admit(key, identity, Caller::ROOT, Request::Challenge) {
            Admission::Answer(Ok(Reply::Challenge(c))) => c,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_connection_is_answered_only_for_the_caller_it_proved() {
        let key = UserKey::from_bytes(&[9; USER_KEY_LEN]);
        let alice = Caller::user(1000, 1000);
        let mut conn = Identity::default();
        let stat = || Request::StatFs;
        let refused = Admission::Answer(Err(FsError::NotPermitted));
        assert_eq!(admit(Some(&key), &mut conn, alice.clone(), stat()), refused, "no proof yet");
        let c = challenge(Some(&key), &mut conn);
        let forged = UserKey::from_bytes(&[8; USER_KEY_LEN]).prove(&Caller::ROOT, &c);
        assert_eq!(admit(Some(&key), &mut conn, Caller::ROOT, Request::Authenticate { proof: forged }), refused);
        let spent = key.prove(&alice, &c);
        assert_eq!(admit(Some(&key), &mut conn, alice.clone(), Request::Authenticate { proof: spent }), refused, "a challenge answers one proof");
        let c = challenge(Some(&key), &mut conn);
        assert_ne!(challenge(Some(&key), &mut Identity::default()), c, "each connection its own");
        let proof = key.prove(&alice, &c);
        assert_eq!(conn.take_session(), None, "no session before a proof is accepted");
        assert_eq!(admit(Some(&key), &mut conn, alice.clone(), Request::Authenticate { proof: proof.clone() }), Admission::Answer(Ok(Reply::Sealed)));
        assert_eq!(conn.take_session(), Some(key.session_key(&proof)), "sealed under the proof's session key");
        assert_eq!(conn.take_session(), None, "taken once");
        assert_eq!(admit(Some(&key), &mut conn, alice.clone(), stat()), Admission::Run(alice.clone(), stat()));
        assert_eq!(admit(Some(&key), &mut conn, Caller::ROOT, stat()), refused, "no switching users");
        assert_eq!(admit(Some(&key), &mut conn, Caller { groups: vec![0], ..alice.clone() }, stat()), refused, "nor groups");
        let mut other = Identity::default();
        challenge(Some(&key), &mut other);
        assert_eq!(admit(Some(&key), &mut other, alice.clone(), Request::Authenticate { proof }), refused, "a proof replayed on another connection");
        assert_eq!(admit(None, &mut Identity::default(), Caller::ROOT, stat()), Admission::Run(Caller::ROOT, stat()), "without a key callers are believed");
    }
}
