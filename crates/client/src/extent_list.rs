//! The extent-list text format (`tessera get --pieces FILE`): a list of file pieces to read or
//! write, in order.
//!
//! ```text
//! # Pieces of a file, one `OFFSET LENGTH` per line, in the order they are transferred.
//! 0        4096
//! 0x10000  512         # hex with 0x
//! 1M       64K         # K, M, G: times 2^10, 2^20, 2^30
//! 100      8           # pieces may overlap and come in any order
//! ```
//!
//! - One piece per line: an offset and a length separated by spaces or tabs.
//! - A number is decimal (`4096`) or hexadecimal with `0x`/`0X` (`0x1000`), optionally followed
//!   by one binary suffix `K`, `M` or `G` (either case): `64K` = 65536, `0x10M` = 16 MiB.
//! - `#` starts a comment that runs to the end of the line; blank lines are ignored. Lines may
//!   end in `\n` or `\r\n`.
//! - A length is at least 1; a piece must end at or below 2^64; the lengths must total at most
//!   2^64 - 1; and a list holds at most [`EXTENT_LIST_PIECES_MAX`] pieces.
//!
//! Every error names the line (counting from 1) and what is wrong with it. The list keeps the
//! file's order: pieces are read into (or written from) the buffer end to end in that order,
//! and where written pieces overlap the later one wins.

use std::fmt;

use thiserror::Error;

use tessera_layout::Extent;

/// Most pieces one list may hold: 16 MiB of extents in memory, far more than one command's
/// scatter/gather list, and small enough that a hostile file cannot exhaust memory.
pub const EXTENT_LIST_PIECES_MAX: usize = 1 << 20;

/// Longest piece of offending text quoted in an error.
const QUOTE_MAX: usize = 40;

/// A line of an extent list that could not be used.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("line {line}: {kind}")]
pub struct ExtentListError {
    /// 1-based line number.
    pub line: usize,
    pub kind: ExtentListErrorKind,
}

/// Which of the two numbers on a line is meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Offset,
    Length,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::Offset => "offset",
            Field::Length => "length",
        })
    }
}

/// What is wrong with a line.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum ExtentListErrorKind {
    #[error("expected `OFFSET LENGTH`, found {found} field(s)")]
    FieldCount { found: usize },
    #[error("{field} {text:?} is not a number (decimal, or hex with 0x; optional K, M or G suffix)")]
    NotANumber { field: Field, text: String },
    #[error("{field} {text:?} does not fit in 64 bits")]
    NumberOverflow { field: Field, text: String },
    #[error("length is zero; every piece holds at least one byte")]
    ZeroLength,
    #[error("piece at offset {offset} of length {len} ends past 2^64")]
    EndOverflow { offset: u64, len: u64 },
    #[error("the pieces total more than 2^64 - 1 bytes")]
    TotalOverflow,
    #[error("more than {EXTENT_LIST_PIECES_MAX} pieces")]
    TooManyPieces,
}

/// Parses an extent list (format in the module docs).
pub fn parse(text: &str) -> Result<Vec<Extent>, ExtentListError> {
    let mut out = Vec::new();
    let mut total = 0u64;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let fail = |kind| ExtentListError { line, kind };
        let content = raw.split('#').next().unwrap_or("");
        let mut fields = content.split_ascii_whitespace();
        let (offset, len) = match (fields.next(), fields.next(), fields.next()) {
            (None, _, _) => continue,
            (Some(o), Some(l), None) => (o, l),
            (Some(_), None, _) => return Err(fail(ExtentListErrorKind::FieldCount { found: 1 })),
            (Some(_), Some(_), Some(_)) => return Err(fail(ExtentListErrorKind::FieldCount { found: 3 + fields.count() })),
        };
        let offset = number(offset, Field::Offset).map_err(fail)?;
        let len = number(len, Field::Length).map_err(fail)?;
        if len == 0 {
            return Err(fail(ExtentListErrorKind::ZeroLength));
        }
        // The end may be exactly 2^64 (the piece holds the very last byte), never beyond.
        if offset.checked_add(len - 1).is_none() {
            return Err(fail(ExtentListErrorKind::EndOverflow { offset, len }));
        }
        total = total.checked_add(len).ok_or_else(|| fail(ExtentListErrorKind::TotalOverflow))?;
        if out.len() == EXTENT_LIST_PIECES_MAX {
            return Err(fail(ExtentListErrorKind::TooManyPieces));
        }
        out.push(Extent { offset, len });
    }
    Ok(out)
}

/// Writes `extents` in the format [`parse`] reads (decimal, one piece per line).
pub fn to_text(extents: &[Extent]) -> String {
    let mut out = String::with_capacity(extents.len() * 16);
    for e in extents {
        out.push_str(&format!("{} {}\n", e.offset, e.len));
    }
    out
}

/// Fuzz body (fuzz target `extent_list`, and the proptest below): any bytes, read as text, parse
/// or fail without panicking; a parsed list obeys the format's bounds and reads back unchanged
/// from its own text.
#[doc(hidden)]
pub fn fuzz_parse(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match parse(&text) {
        Ok(list) => {
            assert!(list.len() <= EXTENT_LIST_PIECES_MAX);
            assert!(list.iter().all(|e| e.len > 0 && e.offset.checked_add(e.len - 1).is_some()));
            assert_eq!(parse(&to_text(&list)).as_ref(), Ok(&list));
        }
        Err(e) => assert!(e.line >= 1 && e.line <= text.lines().count()),
    }
}

/// One number: decimal or 0x hex, then an optional K/M/G suffix.
fn number(text: &str, field: Field) -> Result<u64, ExtentListErrorKind> {
    let not_a_number = || ExtentListErrorKind::NotANumber { field, text: quote(text) };
    let overflow = || ExtentListErrorKind::NumberOverflow { field, text: quote(text) };
    let (body, shift) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let (digits, radix) = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (body, 10),
    };
    // from_str_radix alone would accept a leading '+'.
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(not_a_number());
    }
    let value = u64::from_str_radix(digits, radix).map_err(|_| overflow())?;
    value.checked_mul(1u64 << shift).ok_or_else(overflow)
}

/// `text`, cut to QUOTE_MAX characters so an error stays one readable line.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTE_MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn e(offset: u64, len: u64) -> Extent {
        Extent { offset, len }
    }

    fn err(text: &str) -> ExtentListError {
        parse(text).unwrap_err()
    }

    #[test]
    fn reads_the_documented_example() {
        let text = "# Pieces\n0        4096\n0x10000  512         # hex\r\n\n   \n1M\t64K\n100 8\n0X1fk 0x2M\n";
        assert_eq!(
            parse(text).unwrap(),
            vec![e(0, 4096), e(0x10000, 512), e(1 << 20, 64 << 10), e(100, 8), e(0x1f << 10, 2 << 20)]
        );
        assert_eq!(parse("").unwrap(), vec![]);
        assert_eq!(parse("# nothing\n\n").unwrap(), vec![]);
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        assert_eq!(err("0 1\n\n5 0\n"), ExtentListError { line: 3, kind: ExtentListErrorKind::ZeroLength });
        assert_eq!(err("7\n").kind, ExtentListErrorKind::FieldCount { found: 1 });
        assert_eq!(err("1 2 3 4\n").kind, ExtentListErrorKind::FieldCount { found: 4 });
        assert_eq!(err("0 +5").kind, ExtentListErrorKind::NotANumber { field: Field::Length, text: "+5".into() });
        assert_eq!(err("0x 5").kind, ExtentListErrorKind::NotANumber { field: Field::Offset, text: "0x".into() });
        assert_eq!(err("12KB 5").kind, ExtentListErrorKind::NotANumber { field: Field::Offset, text: "12KB".into() });
        assert_eq!(err("-1 5").kind, ExtentListErrorKind::NotANumber { field: Field::Offset, text: "-1".into() });
        assert_eq!(
            err("18446744073709551616 1").kind,
            ExtentListErrorKind::NumberOverflow { field: Field::Offset, text: "18446744073709551616".into() }
        );
        assert_eq!(err("0 0x400000000G").kind, ExtentListErrorKind::NumberOverflow { field: Field::Length, text: "0x400000000G".into() });
        assert_eq!(err("0xffffffffffffffff 2").kind, ExtentListErrorKind::EndOverflow { offset: u64::MAX, len: 2 });
        // The last byte of the address space is a valid piece.
        assert_eq!(parse("0xffffffffffffffff 1").unwrap(), vec![e(u64::MAX, 1)]);
        assert_eq!(err("0 0x8000000000000000\n0 0x8000000000000000\n"), ExtentListError { line: 2, kind: ExtentListErrorKind::TotalOverflow });
        let message = err("a\n0 zz").to_string();
        assert_eq!(message, "line 1: expected `OFFSET LENGTH`, found 1 field(s)");
        assert!(err("0 zz").to_string().starts_with("line 1: length \"zz\" is not a number"), "{}", err("0 zz"));
    }

    #[test]
    fn quotes_are_bounded() {
        let long = "9".repeat(10_000);
        let kind = err(&format!("{long} 1")).kind;
        assert_eq!(kind, ExtentListErrorKind::NumberOverflow { field: Field::Offset, text: format!("{}...", &long[..QUOTE_MAX]) });
    }

    #[test]
    fn piece_count_is_bounded() {
        let text = "0 1\n".repeat(EXTENT_LIST_PIECES_MAX);
        assert_eq!(parse(&text).unwrap().len(), EXTENT_LIST_PIECES_MAX);
        let over = format!("{text}# one more\n0 1\n");
        assert_eq!(err(&over), ExtentListError { line: EXTENT_LIST_PIECES_MAX + 2, kind: ExtentListErrorKind::TooManyPieces });
    }

    proptest! {
        /// Goal: no input panics; every answer is a list within bounds that round-trips, or an
        /// error naming a line of the input. Method: text from the format's own alphabet (so
        /// it often nearly parses), arbitrary Unicode, arbitrary bytes.
        #[test]
        fn never_panics(text in prop_oneof!["[0-9a-fxXkKmMgG# \t\r\n+-]{0,200}", any::<String>()], bytes in any::<Vec<u8>>()) {
            fuzz_parse(text.as_bytes());
            fuzz_parse(&bytes);
        }

        /// Goal: what `to_text` writes, `parse` reads back unchanged.
        #[test]
        fn round_trips(list in prop::collection::vec((any::<u64>(), 1u64..1 << 40), 0..50)) {
            let list: Vec<Extent> = list.into_iter().map(|(o, l)| e(o.min(u64::MAX - l + 1), l)).collect();
            prop_assert_eq!(parse(&to_text(&list)).unwrap(), list);
        }
    }
}
