//! The gate's `429`, the answer it gives most often: during an overload most requests get
//! one, so it must be the cheapest thing the gate does. Each worker thread keeps the
//! bytes of every `429` it sent this second (the `Date` changes once a second; the
//! `Retry-After`, the reason and whether the connection closes take a handful of values
//! at any moment) and copies them out: no formatting, no allocation and no lock per
//! refusal. Built with [`head::write_own`], so the bytes are exactly the gate's other
//! answers' shape.

use super::http1::head;
use std::cell::RefCell;

/// Distinct `429`s kept per thread; past this the oldest is rebuilt in place.
const KEPT: usize = 8;

const STATUS: &str = "429 Too Many Requests";

struct Built {
    second: u64,
    retry_after_s: u64,
    body: &'static str,
    close: bool,
    bytes: Vec<u8>,
}

impl Built {
    fn is(&self, second: u64, retry_after_s: u64, body: &'static str, close: bool) -> bool {
        self.second == second
            && self.retry_after_s == retry_after_s
            && self.close == close
            && std::ptr::eq(self.body, body)
    }
}

thread_local! {
    static BUILT: RefCell<(usize, Vec<Built>)> = const { RefCell::new((0, Vec::new())) };
}

/// Append the `429` with this `Retry-After` and reason to `out` (cleared first).
pub fn write_429(out: &mut Vec<u8>, retry_after_s: u64, body: &'static str, close: bool) {
    out.clear();
    let second = head::now_second();
    BUILT.with_borrow_mut(|(next, built)| {
        if let Some(b) = built
            .iter()
            .find(|b| b.is(second, retry_after_s, body, close))
        {
            out.extend_from_slice(&b.bytes);
            return;
        }
        let fresh = Built {
            second,
            retry_after_s,
            body,
            close,
            bytes: Vec::new(),
        };
        // A stale entry is rebuilt in its own buffer; else a new one, else the oldest.
        let i = match built.iter().position(|b| b.second != second) {
            Some(i) => i,
            None if built.len() < KEPT => {
                built.push(fresh);
                built.len() - 1
            }
            None => {
                *next = (*next + 1) % KEPT;
                *next
            }
        };
        let b = &mut built[i];
        let mut bytes = std::mem::take(&mut b.bytes);
        bytes.clear();
        head::write_own(&mut bytes, STATUS, Some(retry_after_s), body, close);
        out.extend_from_slice(&bytes);
        *b = Built {
            second,
            retry_after_s,
            body,
            close,
            bytes,
        };
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(retry_after_s: u64, body: &'static str, close: bool) -> Vec<u8> {
        let mut out = Vec::new();
        head::write_own(&mut out, STATUS, Some(retry_after_s), body, close);
        out
    }

    #[test]
    fn a_kept_429_is_byte_for_byte_the_one_built_fresh() {
        const A: &str = "over the gate's rate limit\n";
        const B: &str = "over the gate's in-flight limit\n";
        let mut out = b"left over".to_vec();
        for round in 0..3 {
            for (retry, body, close) in [(1, A, false), (7, A, false), (1, B, true), (1, A, true)] {
                write_429(&mut out, retry, body, close);
                let want = fresh(retry, body, close);
                // The Date may have turned between the two: compare around it.
                let cut = |v: &[u8]| {
                    let s = String::from_utf8(v.to_vec()).unwrap();
                    s.lines()
                        .filter(|l| !l.starts_with("date: "))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                assert_eq!(cut(&out), cut(&want), "round {round}");
                assert!(String::from_utf8_lossy(&out).contains("\r\ndate: "));
            }
        }
    }

    #[test]
    fn more_kinds_than_kept_are_all_answered_right() {
        const A: &str = "a\n";
        let mut out = Vec::new();
        for retry in 0..(3 * KEPT as u64) {
            write_429(&mut out, retry, A, false);
            let text = String::from_utf8(out.clone()).unwrap();
            assert!(
                text.contains(&format!("\r\nretry-after: {retry}\r\n")),
                "{text}"
            );
            assert!(text.ends_with("\r\n\r\na\n"), "{text}");
        }
    }
}
