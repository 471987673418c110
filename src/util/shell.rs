//! Words pasted into a shell: a command the summary prints must run as printed, whatever
//! the path or URL holds.

/// `word` as one POSIX shell word: as is when it holds only characters no shell treats
/// specially, else in single quotes (a quote inside written `'\''`).
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@,+%".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn plain_words_stay_and_others_are_quoted() {
        assert_eq!(quote("http://127.0.0.1:18081"), "http://127.0.0.1:18081");
        assert_eq!(quote("/tmp/a b/gate.token"), "'/tmp/a b/gate.token'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }
}
