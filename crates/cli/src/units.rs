//! Sizes as people type and read them: `64K`, `1M`, `4MiB`, `1.5G` in, `1.5 MiB` out.

/// Parses a byte count with an optional binary suffix (K, M, G, T; `KiB`, `KB` and `k` alike).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("`{text}`: unknown size suffix `{other}` (use K, M, G or T)")),
    };
    if number.is_empty() {
        return Err(format!("`{text}` is not a size (examples: 4096, 64K, 1M, 1.5G)"));
    }
    let bytes = if number.contains('.') {
        let v: f64 = number.parse().map_err(|_| format!("`{text}` is not a size"))?;
        v * (1u64 << shift) as f64
    } else {
        let v: u64 = number.parse().map_err(|_| format!("`{text}` is not a size"))?;
        return v.checked_mul(1u64 << shift).ok_or_else(|| format!("`{text}` is too large"));
    };
    if !(0.0..=u64::MAX as f64).contains(&bytes) || bytes.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    Ok(bytes as u64)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_usual_spellings() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("2 kb"), Ok(2048));
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
}
