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
