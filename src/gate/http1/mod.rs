//! The gate's own HTTP/1.1 codec for the proxy path. hyper serves the admin API, but on
//! the path benchmarked against nginx its two dispatchers (server side and client side)
//! cost about twice nginx's user time per request, for features a pass-through edge does
//! not use (it never decodes a body, never needs a typed header map). Here a head is
//! parsed in place with httparse, rewritten into one buffer, and bodies pass through byte
//! for byte; [`framing`] only tracks where each body ends, and [`scan`] keeps a head
//! arriving in pieces from being parsed again from the start on every read.

pub mod framing;
pub mod head;
pub mod request;
pub mod response;
pub mod scan;

pub use framing::{BodyCursor, Framing, FramingError};
pub use head::HeadError;
pub use request::{parse_request, RequestHead};
pub use response::{parse_response, ResponseHead};
pub use scan::{leading_empty_lines, parse_request_scanned, HeadScan};
