//! Sizes as people type and read them: `64K`, `1M`, `4MiB`, `1.5G` in, `1.5 MiB` out; link
//! rates as `tc` spells them: `1gbit`, `500mbit`.

use std::fmt;
use std::str::FromStr;

/// Parses a count that must be at least 1 (a bench sweep of no files or rounds measures
/// nothing).
pub fn parse_positive(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("`{text}`: {e}")),
    }
}

/// [`parse_size`], refusing sizes below `MIN` bytes.
pub fn parse_size_min<const MIN: u64>(text: &str) -> Result<u64, String> {
    let bytes = parse_size(text)?;
    if bytes < MIN {
        return Err(format!("`{text}`: at least {} here", format_size(MIN)));
    }
    Ok(bytes)
}

/// Parses a byte count with an optional suffix, as GNU coreutils (`truncate -s`, `dd`) read
/// them: K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024; KB, MB, GB, TB powers of 1000.
/// Case is ignored (`64k` is `64K`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let unit: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => return Err(format!("`{text}`: unknown size suffix `{other}` (use K, M, G or T for powers of 1024, KB, MB, GB or TB for powers of 1000)")),
    };
    if number.is_empty() {
        return Err(format!("`{text}` is not a size (examples: 4096, 64K, 1M, 1.5G)"));
    }
    let bytes = if number.contains('.') {
        let v: f64 = number.parse().map_err(|_| format!("`{text}` is not a size"))?;
        v * unit as f64
    } else {
        let v: u64 = number.parse().map_err(|_| format!("`{text}` is not a size"))?;
        return v.checked_mul(unit).ok_or_else(|| format!("`{text}` is too large"));
    };
    if !(0.0..=u64::MAX as f64).contains(&bytes) || bytes.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a stripe count: a number of OSDs, or `0` or `-1` for every OSD (`-1` is how Lustre's
/// `lfs setstripe -c` spells it, so a Lustre user's habit works here).
pub fn parse_stripe_count(text: &str) -> Result<u32, String> {
    match text.trim() {
        "-1" => Ok(0),
        t => t.parse().map_err(|_| format!("`{text}` is not a stripe count (a number of OSDs, or -1 or 0 for every OSD)")),
    }
}

/// Parses a duration: a whole number with a unit, `50us`, `500ms`, `30s`, `10m`, `2h` (a bare
/// number is seconds).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("`{text}` is not a duration (examples: 500ms, 30s, 10m, 2h)"))?;
    let us = match unit.trim() {
        "us" => 1,
        "ms" => 1000,
        "" | "s" => 1_000_000,
        "m" | "min" => 60_000_000,
        "h" => 3_600_000_000,
        other => return Err(format!("`{text}`: unknown duration unit `{other}` (use us, ms, s, m or h)")),
    };
    n.checked_mul(us).map(std::time::Duration::from_micros).ok_or_else(|| format!("`{text}` is too long"))
}

/// `n` things, singular for one: `count(1, "file", "files")` is `1 file`.
pub fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1536` -> `1.5 KiB`; exact byte counts below 1 KiB.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// As `ls -lh`: `1536` -> `1.5K`, `209715200` -> `200M`; rounded up, one decimal below 10.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["K", "M", "G", "T", "P", "E"];
    if bytes < 1024 {
        return bytes.to_string();
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value.ceil() >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    let tenths = (value * 10.0).ceil() / 10.0;
    if tenths < 10.0 {
        format!("{tenths:.1}{}", UNITS[unit])
    } else {
        format!("{:.0}{}", value.ceil(), UNITS[unit])
    }
}

/// A link rate in bits per second (decimal units, as network links are rated).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate(u64);

impl Rate {
    pub fn from_bits_per_sec(bits: u64) -> Rate {
        Rate(bits)
    }

    pub fn bits_per_sec(self) -> u64 {
        self.0
    }

    pub fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }

    /// MiB/s, the unit the benches print throughput in.
    pub fn mib_per_sec(self) -> f64 {
        self.0 as f64 / 8.0 / (1 << 20) as f64
    }
}

/// `1gbit`, `2.5gbit`, `500mbit`, `100kbit`, `1000000bit`. Only bit units: `tc` reads `mbps` as
/// megabytes per second, a confusion not worth carrying over.
impl FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Rate, String> {
        let t = text.trim().to_ascii_lowercase();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let scale = match unit {
            "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            _ => return Err(format!("`{text}`: give a rate in bit, kbit, mbit or gbit (e.g. 1gbit)")),
        };
        let value: f64 = number.parse().map_err(|_| format!("`{text}` is not a rate (e.g. 1gbit, 500mbit)"))?;
        let bits = value * scale;
        if !(8.0..=1e13).contains(&bits) {
            return Err(format!("`{text}`: a rate must lie between 8bit and 10000gbit"));
        }
        Ok(Rate(bits.round() as u64))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 as f64;
        match b {
            _ if b >= 1e9 => write!(f, "{}gbit", b / 1e9),
            _ if b >= 1e6 => write!(f, "{}mbit", b / 1e6),
            _ if b >= 1e3 => write!(f, "{}kbit", b / 1e3),
            _ => write!(f, "{}bit", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_counts_and_minimum_sizes_refuse_what_is_below() {
        assert_eq!(parse_positive("3"), Ok(3));
        assert_eq!(parse_positive("0").unwrap_err(), "must be at least 1");
        assert!(parse_positive("-1").is_err() && parse_positive("x").is_err());
        assert_eq!(parse_size_min::<65536>("64K"), Ok(65536));
        assert_eq!(parse_size_min::<65536>("63K").unwrap_err(), "`63K`: at least 64 KiB here");
        assert!(parse_size_min::<1>("0").is_err() && parse_size_min::<1>("1").is_ok());
    }

    #[test]
    fn counts_say_one_thing_in_the_singular() {
        assert_eq!(count(0u64, "directory", "directories"), "0 directories");
        assert_eq!(count(1u64, "directory", "directories"), "1 directory");
        assert_eq!(count(2u32, "file", "files"), "2 files");
    }

    #[test]
    fn stripe_counts_take_lustres_minus_one_for_every_osd() {
        assert_eq!(parse_stripe_count("-1"), Ok(0));
        assert_eq!(parse_stripe_count("0"), Ok(0));
        assert_eq!(parse_stripe_count("3"), Ok(3));
        for bad in ["-2", "two", "", "1.5", "4294967296"] {
            let err = parse_stripe_count(bad).unwrap_err();
            assert!(err.contains("is not a stripe count") && err.contains("-1 or 0 for every OSD"), "{bad}: {err}");
        }
    }

    #[test]
    fn human_sizes_round_up_as_ls_does() {
        assert_eq!(human_size(0), "0");
        assert_eq!(human_size(1023), "1023");
        assert_eq!(human_size(1536), "1.5K");
        assert_eq!(human_size(1025), "1.1K");
        assert_eq!(human_size(200 << 20), "200M");
        assert_eq!(human_size((1 << 20) - 1), "1.0M");
        assert_eq!(human_size(3 << 30), "3.0G");
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("500ms"), Ok(std::time::Duration::from_millis(500)));
        assert_eq!(parse_duration("50us"), Ok(std::time::Duration::from_micros(50)));
        assert_eq!(parse_duration("30"), Ok(std::time::Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(std::time::Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Ok(std::time::Duration::from_secs(7200)));
        assert!(parse_duration("1.5s").is_err());
        assert!(parse_duration("5 days").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn parses_the_usual_spellings() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2 kib"), Ok(2048));
        assert_eq!(parse_size("2 kb"), Ok(2000), "KB is 1000, as GNU truncate reads it");
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(parse_size("20000000TB"), Err("`20000000TB` is too large".into()));
    }

    #[test]
    fn refuses_what_is_not_a_size() {
        for bad in ["", "K", "12Q", "1.3", "-1", "99999999999999999999", "20000000000T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_compactly() {
        assert_eq!(format_size(0), "0 B");
        assert_eq!(format_size(1023), "1023 B");
        assert_eq!(format_size(1536), "1.5 KiB");
        assert_eq!(format_size(4 << 20), "4 MiB");
    }

    #[test]
    fn rates_parse_in_decimal_bit_units() {
        assert_eq!("1gbit".parse::<Rate>().unwrap().bits_per_sec(), 1_000_000_000);
        assert_eq!("2.5Gbit".parse::<Rate>().unwrap().bytes_per_sec(), 312_500_000);
        assert_eq!("500mbit".parse::<Rate>().unwrap().to_string(), "500mbit");
        assert_eq!("1gbit".parse::<Rate>().unwrap().to_string(), "1gbit");
        for bad in ["", "1", "1gbps", "1mbps", "gbit", "0bit", "-1gbit"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }
}
