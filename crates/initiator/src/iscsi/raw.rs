//! A raw iSCSI connection for tests: log in like a real initiator, then send hand-built (even
//! malformed) PDUs or bytes and read the target's replies one by one. No reader thread, no
//! window: the test drives every sequence number itself.

use std::io;
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

use tessera_iscsi::login::{InitiatorNegotiator, SessionType, DEFAULT_MAX_RECV_DATA_SEGMENT_LEN};
use tessera_iscsi::pdu::Pdu;
use tessera_iscsi::{DecodeError, Digests, PduReader, PduWriter, ReadError, BHS_LEN};
use tessera_scsi::TransportError;

use super::login::{login, LoginResult};
use super::session::connect;
use super::SessionConfig;

/// One PDU the target sent.
#[derive(Debug)]
pub struct RawReply {
    pub bhs: [u8; BHS_LEN],
    pub pdu: Result<Pdu, DecodeError>,
    pub data: Vec<u8>,
}

pub struct RawConnection {
    reader: PduReader<TcpStream>,
    writer: PduWriter<TcpStream>,
    peer: String,
    /// Set by a successful login.
    pub login: Option<LoginResult>,
}

impl RawConnection {
    pub fn connect<A: ToSocketAddrs>(addr: A) -> Result<RawConnection, TransportError> {
        let (stream, peer) = connect(addr)?;
        Self::over_named(stream, peer)
    }

    /// A raw connection over a socket the caller connected itself (a test that must hold the
    /// socket before the target accepts it).
    pub fn over(stream: TcpStream) -> Result<RawConnection, TransportError> {
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "the target".into());
        Self::over_named(stream, peer)
    }

    fn over_named(stream: TcpStream, peer: String) -> Result<RawConnection, TransportError> {
        let r = stream.try_clone().map_err(|e| super::login::io_err(&peer, e))?;
        Ok(RawConnection {
            reader: PduReader::new(r, DEFAULT_MAX_RECV_DATA_SEGMENT_LEN),
            writer: PduWriter::new(stream),
            peer,
            login: None,
        })
    }

    /// Logs in as a normal session and switches digests and segment size as negotiated.
    pub fn login(&mut self, config: &SessionConfig) -> Result<LoginResult, TransportError> {
        self.login_as(config, SessionType::Normal)
    }

    pub fn login_as(&mut self, config: &SessionConfig, kind: SessionType) -> Result<LoginResult, TransportError> {
        let neg = InitiatorNegotiator::new(config.offer(), &config.initiator_name, &config.target_name, kind);
        let result = login(&mut self.reader, &mut self.writer, config.isid, neg, config.chap.clone(), &self.peer)?;
        let p = &result.params;
        let digests = Digests { header: p.header_digest, data: p.data_digest };
        self.reader.digests = digests;
        self.writer.digests = digests;
        self.reader.max_data_segment_len = p.initiator_max_recv_data_segment_len;
        self.login = Some(result.clone());
        Ok(result)
    }

    pub fn digests(&self) -> Digests {
        self.writer.digests
    }

    /// Sends a PDU framed with the negotiated digests.
    pub fn send_pdu(&mut self, pdu: &Pdu, data: &[u8]) -> io::Result<()> {
        self.writer.write_pdu(pdu, &[data])
    }

    /// Sends bytes exactly as given.
    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.writer.write_raw(bytes)
    }

    /// Reads the next PDU and its data segment.
    pub fn recv(&mut self) -> Result<RawReply, ReadError> {
        let inc = self.reader.read_header()?;
        let data = self.reader.read_data_vec(inc.data_segment_len())?;
        Ok(RawReply { bhs: inc.bhs, pdu: inc.pdu, data })
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reader.get_ref().set_read_timeout(timeout)
    }

    /// True when the target has closed the connection (reads EOF or a reset within `wait`).
    pub fn is_closed_by_peer(&mut self, wait: Duration) -> bool {
        if self.set_read_timeout(Some(wait)).is_err() {
            return true;
        }
        loop {
            match self.recv() {
                Ok(_) => continue,
                Err(ReadError::Closed) => return true,
                Err(ReadError::Idle) => return false,
                Err(ReadError::Io(e)) => {
                    return !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
                }
                Err(_) => return true,
            }
        }
    }

    /// Sends FIN but keeps reading: the target sees the connection end, and
    /// [`RawConnection::is_closed_by_peer`] then tells when it has closed its side.
    pub fn shutdown_write(&self) -> io::Result<()> {
        self.writer.get_ref().shutdown(Shutdown::Write)
    }

    pub fn close(self) {
        let _ = self.writer.get_ref().shutdown(Shutdown::Both);
    }
}
