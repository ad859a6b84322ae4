//! PDU codec tests: byte-exact vectors at the RFC 7143 §11 offsets, round trips, and decoding
//! arbitrary bytes without panicking.

use proptest::prelude::*;

use super::*;
use crate::bhs::{BHS_LEN, RESERVED_TAG};

fn encode(p: &Pdu, data_len: u32) -> Vec<u8> {
    let mut out = Vec::new();
    p.encode(data_len, &mut out);
    out
}

fn decode(bytes: &[u8]) -> Result<Pdu, crate::DecodeError> {
    let mut bhs = [0u8; BHS_LEN];
    bhs.copy_from_slice(&bytes[..BHS_LEN]);
    Pdu::decode(&bhs, &bytes[BHS_LEN..])
}

#[test]
fn scsi_command_bytes() {
    let cmd = ScsiCommand {
        immediate: false,
        final_bit: true,
        read: true,
        write: false,
        task_attr: TASK_ATTR_SIMPLE,
        lun: 0x0001_0000_0000_0000,
        itt: 0x1122_3344,
        expected_data_transfer_length: 0x200,
        cmd_sn: 7,
        exp_stat_sn: 9,
        cdb: vec![0x12, 0, 0, 0, 0x24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        bidi_read_len: None,
    };
    let b = encode(&Pdu::ScsiCommand(cmd.clone()), 0);
    assert_eq!(b.len(), 48);
    assert_eq!(b[0], 0x01);
    assert_eq!(b[1], 0xC1); // F, R, Simple
    assert_eq!(&b[8..10], &[0x00, 0x01]);
    assert_eq!(&b[16..20], &[0x11, 0x22, 0x33, 0x44]);
    assert_eq!(&b[20..24], &[0, 0, 2, 0]);
    assert_eq!(b[27], 7);
    assert_eq!(b[31], 9);
    assert_eq!(b[32], 0x12);
    assert_eq!(b[36], 0x24);
    assert_eq!(decode(&b).unwrap(), Pdu::ScsiCommand(cmd));
}

#[test]
fn long_cdb_and_bidi_use_ahs() {
    let mut cdb = vec![0x7F; 236];
    cdb[7] = 0xE4;
    let cmd = ScsiCommand {
        immediate: false,
        final_bit: true,
        read: true,
        write: true,
        task_attr: 1,
        lun: 0,
        itt: 1,
        expected_data_transfer_length: 100,
        cmd_sn: 1,
        exp_stat_sn: 1,
        cdb,
        bidi_read_len: Some(4096),
    };
    let b = encode(&Pdu::ScsiCommand(cmd.clone()), 100);
    // Extended CDB AHS: 3 + 1 + 220 = 224 bytes; bidi AHS 8 bytes.
    assert_eq!(b[4] as usize * 4, 224 + 8);
    assert_eq!(&b[5..8], &[0, 0, 100]);
    assert_eq!(&b[48..52], &[0x00, 221, 0x01, 0x00]);
    assert_eq!(decode(&b).unwrap(), Pdu::ScsiCommand(cmd));
}

#[test]
fn data_in_with_status_bytes() {
    let d = DataIn {
        final_bit: true,
        underflow: true,
        status: Some(0),
        itt: 5,
        ttt: RESERVED_TAG,
        stat_sn: 10,
        exp_cmd_sn: 11,
        max_cmd_sn: 138,
        data_sn: 3,
        buffer_offset: 0x30000,
        residual_count: 12,
        ..Default::default()
    };
    let b = encode(&Pdu::DataIn(d.clone()), 512);
    assert_eq!(b[0], 0x25);
    assert_eq!(b[1], 0x83); // F, U, S
    assert_eq!(&b[5..8], &[0, 2, 0]);
    assert_eq!(&b[20..24], &[0xFF; 4]);
    assert_eq!(&b[40..44], &[0, 3, 0, 0]);
    assert_eq!(b[47], 12);
    assert_eq!(decode(&b).unwrap(), Pdu::DataIn(d));
}

#[test]
fn login_request_bytes() {
    let l = LoginRequest {
        transit: true,
        cont: false,
        csg: STAGE_SECURITY,
        nsg: STAGE_OPERATIONAL,
        version_max: 0,
        version_min: 0,
        isid: [0x80, 0, 0x12, 0x34, 0, 1],
        tsih: 0,
        itt: 0,
        cid: 0,
        cmd_sn: 1,
        exp_stat_sn: 0,
    };
    let b = encode(&Pdu::LoginRequest(l.clone()), 30);
    assert_eq!(b[0], 0x43);
    assert_eq!(b[1], 0x81);
    assert_eq!(&b[8..14], &[0x80, 0, 0x12, 0x34, 0, 1]);
    assert_eq!(decode(&b).unwrap(), Pdu::LoginRequest(l));
}

#[test]
fn r2t_and_response_bytes() {
    let r = R2t { itt: 1, ttt: 2, r2t_sn: 3, buffer_offset: 4, desired_data_transfer_length: 5, ..Default::default() };
    let b = encode(&Pdu::R2t(r.clone()), 0);
    assert_eq!((b[0], b[1], b[23], b[39], b[43], b[47]), (0x31, 0x80, 2, 3, 4, 5));
    assert_eq!(decode(&b).unwrap(), Pdu::R2t(r));
    let s = ScsiResponse { status: 2, overflow: true, residual_count: 9, ..Default::default() };
    let b = encode(&Pdu::ScsiResponse(s.clone()), 20);
    assert_eq!((b[0], b[1], b[3], b[47]), (0x21, 0x84, 2, 9));
    assert_eq!(decode(&b).unwrap(), Pdu::ScsiResponse(s));
}

#[test]
fn reject_carries_reserved_itt() {
    let r = Reject { reason: reject_reason::PROTOCOL_ERROR, stat_sn: 1, ..Default::default() };
    let b = encode(&Pdu::Reject(r.clone()), 48);
    assert_eq!((b[0], b[2]), (0x3F, 0x04));
    assert_eq!(&b[16..20], &[0xFF; 4]);
    assert_eq!(decode(&b).unwrap(), Pdu::Reject(r));
}

#[test]
fn invalid_opcode_and_stray_ahs() {
    let mut b = [0u8; BHS_LEN];
    b[0] = 0x1D;
    assert_eq!(decode(&b), Err(crate::DecodeError::Opcode(0x1D)));
    let mut b = vec![0u8; BHS_LEN + 8];
    b[0] = 0x00; // NOP-Out with an AHS
    b[4] = 2;
    assert!(decode(&b).is_err());
}

const OPCODES: &[u8] = &[
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x32, 0x3F,
];

proptest! {
    /// decode(encode(x)) == x for every header decode can produce: random BHS bytes with a
    /// valid opcode, decoded, re-encoded and decoded again.
    #[test]
    fn round_trip_decoded_headers(op in proptest::sample::select(OPCODES), imm in any::<bool>(),
                                  rest in proptest::collection::vec(any::<u8>(), 47)) {
        let mut b = [0u8; BHS_LEN];
        b[0] = op | if imm { 0x40 } else { 0 };
        b[1..].copy_from_slice(&rest);
        b[4] = 0; // no AHS
        if let Ok(p) = Pdu::decode(&b, &[]) {
            let dsl = crate::bhs::Framing::parse(&b).data_segment_len;
            let again = decode(&encode(&p, dsl)).unwrap();
            prop_assert_eq!(again, p);
        }
    }

    /// SCSI Commands with CDBs of every legal length and optional bidi length round trip.
    #[test]
    fn round_trip_commands(cdb in proptest::collection::vec(any::<u8>(), 16..=260),
                           bidi in proptest::option::of(any::<u32>()), itt in any::<u32>(),
                           edtl in any::<u32>(), r in any::<bool>(), w in any::<bool>()) {
        let cmd = ScsiCommand { immediate: false, final_bit: true, read: r, write: w, task_attr: 1, lun: 0,
            itt, expected_data_transfer_length: edtl, cmd_sn: 1, exp_stat_sn: 2, cdb, bidi_read_len: bidi };
        let p = Pdu::ScsiCommand(cmd);
        prop_assert_eq!(decode(&encode(&p, 0)).unwrap(), p);
    }

    /// Arbitrary BHS and AHS bytes never panic the decoder.
    #[test]
    fn decode_never_panics(bhs in proptest::collection::vec(any::<u8>(), 48),
                           ahs in proptest::collection::vec(any::<u8>(), 0..64)) {
        let mut b = [0u8; BHS_LEN];
        b.copy_from_slice(&bhs);
        b[4] = (ahs.len() / 4) as u8;
        let _ = Pdu::decode(&b, &ahs[..ahs.len() / 4 * 4]);
        let _ = Pdu::decode(&b, &ahs);
    }
}
