//! SET KEY and SET MASTER KEY: what the security manager sends to establish and rotate an OSD's
//! keys. The command carries a seed, never a key; the credential must come from the parent of
//! the key being set (docs/security.md).

use tessera_osd_proto::ServiceAction;
use tessera_scsi::{ScsiRequest, ScsiStatus, ScsiTransport};
use tessera_security::clock::now_ms;
use tessera_security::keys::{KEY_ID_LEN, SEED_LEN};
use tessera_security::{Credential, KeyCommand, KeySlot, OsdKeys, SecurityMethod};

use super::{is_unit_attention, random_u64, OsdClient, OsdError, UNIT_ATTENTION_RETRIES};

/// A key identifier and a seed for SET KEY. Neither is secret (both travel in the clear; the
/// parent key is the secret), they only need to differ from command to command.
pub fn fresh_seed() -> ([u8; KEY_ID_LEN], [u8; SEED_LEN]) {
    let mut bytes = [0u8; KEY_ID_LEN + SEED_LEN];
    for chunk in bytes.chunks_mut(8) {
        let r = random_u64().to_be_bytes();
        chunk.copy_from_slice(&r[..chunk.len()]);
    }
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&bytes[..KEY_ID_LEN]);
    let mut seed = [0u8; SEED_LEN];
    seed.copy_from_slice(&bytes[KEY_ID_LEN..]);
    (id, seed)
}

/// INQUIRY with EVPD for the unit serial number page (SPC-4 §6.6, §7.8.16).
const INQUIRY_UNIT_SERIAL: [u8; 6] = [0x12, 0x01, 0x80, 0x00, 0xFF, 0x00];

impl<T: ScsiTransport> OsdClient<T> {
    /// The OSD's system id, which every capability key binds. Read from the unit serial number
    /// (VPD page 0x80, the system id in hex on a Tessera OSD): INQUIRY is answered without a
    /// capability, so a security manager can learn it before it holds any key. A wrong answer
    /// only makes the manager's credentials fail; it reveals nothing.
    pub fn system_id(&self) -> Result<[u8; 20], OsdError> {
        let request = ScsiRequest { lun: self.lun, cdb: &INQUIRY_UNIT_SERIAL, data_out: &[], data_in_len: 0xFF };
        let mut attempts = 0;
        let response = loop {
            let response = self.transport.execute(&request)?;
            attempts += 1;
            if !is_unit_attention(&response) || attempts > UNIT_ATTENTION_RETRIES {
                break response;
            }
        };
        let missing = || OsdError::Missing { peer: self.peer(), service_action: ServiceAction::GetAttributes, what: "a 20-byte system id in the unit serial number" };
        if response.status != ScsiStatus::Good || response.data_in.len() < 4 {
            return Err(missing());
        }
        let len = u16::from_be_bytes([response.data_in[2], response.data_in[3]]) as usize;
        let serial = response.data_in.get(4..4 + len).ok_or_else(missing)?;
        let text = std::str::from_utf8(serial).map_err(|_| missing())?.trim();
        let mut id = [0u8; 20];
        if text.len() != 40 {
            return Err(missing());
        }
        for (i, b) in id.iter_mut().enumerate() {
            *b = u8::from_str_radix(text.get(2 * i..2 * i + 2).ok_or_else(missing)?, 16).map_err(|_| missing())?;
        }
        Ok(id)
    }

    /// Sets `slot` on the OSD to a fresh key derived from its parent and records it in `keys`
    /// once the OSD accepted it.
    pub fn establish_key(&self, keys: &mut OsdKeys, slot: KeySlot, method: SecurityMethod) -> Result<(), OsdError> {
        let (key_id, seed) = fresh_seed();
        let (command, credential) = keys.key_command(slot, key_id, seed, method, now_ms())?;
        self.set_key(&command, &credential)?;
        keys.record(&command)?;
        Ok(())
    }

    /// Sends one SET KEY / SET MASTER KEY signed with `credential` and checks the answer.
    pub fn set_key(&self, command: &KeyCommand, credential: &Credential) -> Result<(), OsdError> {
        let service_action = if command.slot == KeySlot::Master { ServiceAction::SetMasterKey } else { ServiceAction::SetKey };
        let mut attempts = 0;
        // Resent after a UNIT ATTENTION like any command, each time with a fresh nonce.
        let (signed, response) = loop {
            let mut cdb = command.encode();
            let signed = credential.sign_bare_cdb(&mut cdb, self.nonces.next(now_ms()));
            let request = ScsiRequest { lun: self.lun, cdb: &cdb, data_out: &[], data_in_len: 0 };
            let response = self.transport.execute(&request)?;
            attempts += 1;
            if !is_unit_attention(&response) || attempts > UNIT_ATTENTION_RETRIES {
                break (signed, response);
            }
        };
        let partition_id = command.addressed().partition_id();
        match (response.status, response.sense) {
            (ScsiStatus::Good, sense) => {
                let placement = tessera_osd_proto::ReplyPlacement { data_len_max: 0, retrieved: None };
                let mut data_in = response.data_in;
                signed
                    .verify(ScsiStatus::Good.code(), sense.as_ref(), &placement, &mut data_in)
                    .map_err(|source| OsdError::Integrity { peer: self.peer(), service_action, source })
            }
            (ScsiStatus::CheckCondition, Some(sense)) => {
                Err(OsdError::Sense { peer: self.peer(), service_action, partition_id, object_id: 0, sense: Box::new(sense) })
            }
            (status, _) => Err(OsdError::Status { peer: self.peer(), service_action, status }),
        }
    }
}
