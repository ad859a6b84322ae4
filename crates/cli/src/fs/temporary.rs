//! The hidden names copies are written under, beside their destination, before they are
//! renamed into place (`.<name>.<tag>`). A destination may have a name of the longest length
//! allowed, so the name part is cut to keep the whole within that length: the tag (command and
//! process id) is what keeps two copies apart.

use tessera_mds_proto::limits::NAME_LEN_MAX as NAME_MAX;

/// `.<name>.<tag>`, `name` cut at a character boundary where the whole would pass NAME_MAX.
pub fn hidden_name(name: &str, tag: &str) -> String {
    let room = NAME_MAX.saturating_sub(tag.len() + 2);
    let mut cut = name.len().min(room);
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(".{}.{tag}", &name[..cut])
}

/// Tags of the temporaries copies leave in Tessera (`put`, `cp`, a `mv` between servers),
/// each followed by `-<pid>`.
const TESSERA_TAGS: [&str; 3] = ["put", "cp", "tessera-mv"];

/// The tag under which a `mv` between metadata servers renames its source aside while it
/// moves it. Unlike a copy's temporary, a claimed source holds the only copy of its data.
pub const MV_SOURCE_TAG: &str = "tessera-mv-src";

/// `.<name>.<tag>-<pid>` split into the (possibly cut) name and the tag.
fn split_hidden(hidden: &str) -> Option<(&str, &str)> {
    let rest = hidden.strip_prefix('.')?;
    let (name, tail) = rest.rsplit_once('.')?;
    let (tag, pid) = tail.rsplit_once('-')?;
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then_some((name, tag))
}

/// Whether `name` is a temporary a copy into Tessera writes: `.<name>.<tag>-<pid>`.
pub fn is_copy_temporary(name: &str) -> bool {
    split_hidden(name).is_some_and(|(_, tag)| TESSERA_TAGS.contains(&tag))
}

/// The name (cut, if it was among the longest) of a source a `mv` claimed, if `name` is one.
pub fn claimed_source(name: &str) -> Option<&str> {
    split_hidden(name).filter(|(_, tag)| *tag == MV_SOURCE_TAG).map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporaries_of_copies_are_told_from_other_hidden_names() {
        for tag in TESSERA_TAGS {
            assert!(is_copy_temporary(&hidden_name("data.bin", &format!("{tag}-4242"))), "{tag}");
        }
        assert!(is_copy_temporary(&hidden_name(&"x".repeat(255), "put-4194304")));
        for other in [".bashrc", ".data.put-", ".data.put-12a", "data.put-12", ".data.get-12-0", ".put-12", ".a.cp-7x"] {
            assert!(!is_copy_temporary(other), "{other}");
        }
    }

    #[test]
    fn a_source_a_mv_claimed_gives_back_its_name() {
        assert_eq!(claimed_source(&hidden_name("data.bin", &format!("{MV_SOURCE_TAG}-77"))), Some("data.bin"));
        assert!(!is_copy_temporary(&hidden_name("data.bin", &format!("{MV_SOURCE_TAG}-77"))));
        for other in [".data.bin.tessera-mv-77", ".data.tessera-mv-src-", "data.tessera-mv-src-7"] {
            assert_eq!(claimed_source(other), None, "{other}");
        }
    }

    #[test]
    fn short_names_are_kept_whole() {
        assert_eq!(hidden_name("data.bin", "put-42"), ".data.bin.put-42");
    }

    #[test]
    fn the_longest_names_are_cut_to_fit_at_a_character_boundary() {
        let long = "é".repeat(127) + "x"; // 255 bytes
        let hidden = hidden_name(&long, "tessera-mv-4194304");
        assert!(hidden.len() <= NAME_MAX, "{}", hidden.len());
        assert!(hidden.ends_with(".tessera-mv-4194304"));
        assert!(hidden.starts_with(".éé"));
    }
}
