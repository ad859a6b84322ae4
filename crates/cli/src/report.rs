//! How the `tessera` command writes an error: one line, the error and its causes.

/// The error and its causes on one line, skipping a cause its parent's message already spells
/// out (many error types print their source inline).
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
    }
    line
}

/// An error after which the command exits with `status` rather than 1, as the tool it mirrors
/// does: `ls` exits 2 when a path named on its command line cannot be read, as GNU ls.
#[derive(Debug)]
pub struct ExitStatus {
    pub status: i32,
    pub message: String,
}

impl std::fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitStatus {}

/// The status `main` exits with for `e`: an [`ExitStatus`] in its chain says, else 1.
pub fn exit_status(e: &anyhow::Error) -> i32 {
    e.chain().find_map(|c| c.downcast_ref::<ExitStatus>()).map_or(1, |s| s.status)
}
