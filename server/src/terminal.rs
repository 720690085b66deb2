//! Text that runners and operators wrote, shown on a terminal with control characters escaped.
//!
//! Why: a worker name, a refusal naming a lease holder, an audit reason or reference can hold
//! ANSI escape sequences (clear the screen, move the cursor over earlier lines, set the window
//! title) or bidirectional overrides that reorder what the operator reads. The CLI is used
//! during incidents to decide what to re-queue; what it prints must be what the data says.
//! Every such character is printed as `\u{…}` instead; everything else as it is.

use std::fmt::{self, Write};

/// `Shown(text)` displays `text` with control and bidi-control characters escaped.
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() || is_bidi_control(c) {
                write!(f, "\\u{{{:x}}}", c as u32)?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// Marks and overrides that change the order text is displayed in.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_overrides_are_shown_not_obeyed() {
        assert_eq!(Shown("worker-7").to_string(), "worker-7");
        assert_eq!(Shown("ünïcode · ok ✓").to_string(), "ünïcode · ok ✓");
        assert_eq!(Shown("w\u{1b}[2J\u{1b}]0;pwned\u{7}").to_string(), "w\\u{1b}[2J\\u{1b}]0;pwned\\u{7}");
        assert_eq!(Shown("a\nb\rc\td").to_string(), "a\\u{a}b\\u{d}c\\u{9}d");
        assert_eq!(Shown("\u{9b}31m").to_string(), "\\u{9b}31m", "C1 CSI");
        assert_eq!(Shown("refund \u{202E}001$").to_string(), "refund \\u{202e}001$");
        assert_eq!(Shown("\u{2066}x\u{2069}").to_string(), "\\u{2066}x\\u{2069}");
    }
}
