//! `chmod`'s MODE operand, as chmod(1) takes it: octal (`644`, `0755`, `4755`) or symbolic
//! clauses separated by commas (`u+x`, `go-w`, `a=rX`, `g=u`, `+t`). The symbolic form
//! changes the file's current bits and follows coreutils: with no `ugoa` before an operator it
//! acts on all classes but leaves alone the bits set in the umask; `X` is execute only for a
//! directory or a file some class may already execute; `s` is setuid with `u` and setgid with
//! `g`, `t` the sticky bit with `o`; a class letter after the operator copies that class's bits.

/// A parsed MODE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModeSpec {
    Octal(u32),
    Symbolic(Vec<Clause>),
}

/// `[ugoa]*` followed by one or more actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    /// The classes' bits (0: none named).
    who: u32,
    actions: Vec<Action>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Action {
    op: Op,
    perm: Perm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Remove,
    Set,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Perm {
    /// `rwxst` as bits; `X` apart, since it depends on the file.
    Bits { bits: u32, search: bool },
    /// `u`, `g` or `o` after the operator: that class's current bits, by their shift.
    Copy(u32),
}

const USER: u32 = 0o4700;
const GROUP: u32 = 0o2070;
const OTHER: u32 = 0o1007;
const ALL: u32 = 0o7777;

impl ModeSpec {
    pub fn parse(text: &str) -> Result<ModeSpec, String> {
        let wrong = || format!("`{text}` is not a mode: octal 0 to 7777 (e.g. 644) or symbolic [ugoa]*[-+=][rwxXst]* clauses joined by commas (e.g. u+x,go-w)");
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return u32::from_str_radix(text, 8).ok().filter(|m| *m <= ALL).map(ModeSpec::Octal).ok_or_else(wrong);
        }
        text.split(',').map(|c| parse_clause(c).ok_or_else(wrong)).collect::<Result<_, _>>().map(ModeSpec::Symbolic)
    }

    /// The new permission bits of a file whose bits are `mode`, under `umask`.
    pub fn apply(&self, mode: u32, is_dir: bool, umask: u32) -> u32 {
        let clauses = match self {
            ModeSpec::Octal(m) => return *m,
            ModeSpec::Symbolic(c) => c,
        };
        let mut m = mode & ALL;
        for clause in clauses {
            // No class named: every class, but the umask's bits are left as they are.
            let (affected, kept) = if clause.who == 0 { (ALL, umask & 0o777) } else { (clause.who, 0) };
            for action in &clause.actions {
                let value = match action.perm {
                    Perm::Bits { bits, search } => bits | if search && (is_dir || m & 0o111 != 0) { 0o111 } else { 0 },
                    Perm::Copy(shift) => ((m >> shift) & 7) * 0o111,
                } & affected
                    & !kept;
                m = match action.op {
                    Op::Add => m | value,
                    Op::Remove => m & !value,
                    // As coreutils: `=` without a class clears the umask's bits too.
                    Op::Set if clause.who == 0 => value,
                    Op::Set => (m & !affected) | value,
                };
            }
        }
        m
    }
}

fn parse_clause(text: &str) -> Option<Clause> {
    let mut chars = text.chars().peekable();
    let mut who = 0;
    while let Some(c) = chars.peek() {
        who |= match c {
            'u' => USER,
            'g' => GROUP,
            'o' => OTHER,
            'a' => ALL,
            _ => break,
        };
        chars.next();
    }
    let mut actions = Vec::new();
    while let Some(c) = chars.next() {
        let op = match c {
            '+' => Op::Add,
            '-' => Op::Remove,
            '=' => Op::Set,
            _ => return None,
        };
        let mut bits = 0;
        let mut search = false;
        let mut copy = None;
        while let Some(&p) = chars.peek() {
            match p {
                'r' => bits |= 0o444,
                'w' => bits |= 0o222,
                'x' => bits |= 0o111,
                'X' => search = true,
                's' => bits |= 0o6000,
                't' => bits |= 0o1000,
                'u' | 'g' | 'o' if bits == 0 && !search && copy.is_none() => copy = Some(match p { 'u' => 6, 'g' => 3, _ => 0 }),
                '+' | '-' | '=' => break,
                _ => return None,
            }
            chars.next();
            // A copied class stands alone: `g=u` but not `g=ur`.
            if copy.is_some() && chars.peek().is_some_and(|c| !matches!(c, '+' | '-' | '=')) {
                return None;
            }
        }
        let perm = match copy {
            Some(shift) => Perm::Copy(shift),
            None => Perm::Bits { bits, search },
        };
        actions.push(Action { op, perm });
    }
    (!actions.is_empty()).then_some(Clause { who, actions })
}

/// The process's umask (read by setting it and putting it back; the CLI is single-threaded
/// when it asks).
pub fn process_umask() -> u32 {
    // SAFETY: umask(2) cannot fail; the value is restored at once.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

#[cfg(test)]
mod tests {
    use super::ModeSpec;

    fn chmod(spec: &str, mode: u32, is_dir: bool, umask: u32) -> u32 {
        ModeSpec::parse(spec).unwrap_or_else(|e| panic!("{e}")).apply(mode, is_dir, umask)
    }

    /// Each expectation is what GNU chmod 9.1 gives.
    #[test]
    fn symbolic_modes_follow_coreutils() {
        let f = |spec, mode| chmod(spec, mode, false, 0o022);
        assert_eq!(f("u+x", 0o644), 0o744);
        assert_eq!(f("+x", 0o644), 0o755);
        assert_eq!(f("+w", 0o444), 0o644, "the umask's group and other write stay off");
        assert_eq!(f("a+w", 0o444), 0o666, "named classes ignore the umask");
        assert_eq!(f("go-w", 0o666), 0o644);
        assert_eq!(f("=r", 0o755), 0o444);
        assert_eq!(f("=r", 0o666), 0o444);
        assert_eq!(f("=", 0o644), 0);
        assert_eq!(f("-w", 0o777), 0o577, "the umask's write bits stay on");
        assert_eq!(f("u+-x", 0o744), 0o644, "an empty action");
        assert_eq!(f("u=rw,go=r", 0o777), 0o644);
        assert_eq!(f("o=", 0o757), 0o750);
        assert_eq!(f("g=u", 0o740), 0o770);
        assert_eq!(f("o=g", 0o750), 0o755);
        assert_eq!(f("u+s", 0o755), 0o4755);
        assert_eq!(f("g+s", 0o755), 0o2755);
        assert_eq!(f("+t", 0o755), 0o1755);
        assert_eq!(f("a-x", 0o4755), 0o4644, "setuid stays");
        assert_eq!(f("u-x+w", 0o500), 0o600, "several actions in one clause");
        assert_eq!(f("ug+rw,o-rwx", 0o004), 0o660);
        // X: execute only for directories and files something may already execute.
        assert_eq!(f("a+X", 0o644), 0o644);
        assert_eq!(f("a+X", 0o744), 0o755);
        assert_eq!(chmod("a+X", 0o600, true, 0o022), 0o711);
    }

    #[test]
    fn octal_modes_replace_the_bits() {
        assert_eq!(chmod("644", 0o7777, false, 0o077), 0o644);
        assert_eq!(chmod("0755", 0, true, 0), 0o755);
        assert_eq!(chmod("4755", 0, false, 0), 0o4755);
        assert_eq!(chmod("7777", 0, false, 0), 0o7777);
    }

    #[test]
    fn bad_modes_are_refused_with_both_forms_named() {
        for bad in ["", "8", "77777", "u", "u+y", "z+x", "u+x,", ",u+x", "g=ur", "u+-x=y", "+ x", "u+x g-w"] {
            let err = ModeSpec::parse(bad).unwrap_err();
            assert!(err.contains("octal") && err.contains("symbolic"), "{bad:?}: {err}");
        }
    }
}
