//! The gate's upstream connections: each client connection owns its own, at most one per
//! replica, and uses them inside its own task.
//!
//! Why not a shared pool: a pool's checkout (a lock and a hashed key) and the hand-offs
//! between tasks cost more per request than the proxying itself, and on a busy machine
//! every hand-off is a wake-up. An HTTP/1.1 client connection carries one request at a
//! time, so it never needs more than one upstream connection per replica. A link goes
//! back to its slot only after a complete response it can follow with another request;
//! anything else (an error, a client that hung up mid-response) drops it, which closes it.

use bytes::BytesMut;
use std::io;
use tokio::net::TcpStream;

/// Room kept free in a read buffer before each read, from a client or an upstream.
pub const READ_ROOM: usize = 8 * 1024;

/// One upstream connection and the bytes read from it not yet passed on.
pub struct Link {
    pub stream: TcpStream,
    pub buf: BytesMut,
    /// Taken from the slot rather than freshly opened: the upstream may have closed it
    /// meanwhile, so a request whose first write fails on it may be sent again once
    /// ([`super::resend`]).
    pub reused: bool,
}

/// A client connection's idle upstream links, one slot per replica.
pub struct Links {
    slots: Vec<Option<Link>>,
}

impl Links {
    pub fn new(replicas: usize) -> Links {
        Links {
            slots: (0..replicas).map(|_| None).collect(),
        }
    }

    /// The idle link to `replica`, unless the upstream has closed it (or sent something
    /// unasked, which leaves it out of step) since it was put back.
    pub fn take(&mut self, replica: usize) -> Option<Link> {
        let mut link = self.slots.get_mut(replica)?.take()?;
        let mut probe = [0u8; 1];
        // No syscall when nothing happened on the socket: tokio knows it is not readable.
        match link.stream.try_read(&mut probe) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                link.reused = true;
                Some(link)
            }
            _ => None,
        }
    }

    pub fn put(&mut self, replica: usize, mut link: Link) {
        if let Some(slot) = self.slots.get_mut(replica) {
            link.buf.clear();
            *slot = Some(link);
        }
    }
}

/// Open a new link to `authority` (host:port).
pub async fn connect(authority: &http::uri::Authority) -> io::Result<Link> {
    let port = authority.port_u16().unwrap_or(80);
    let stream = TcpStream::connect((authority.host(), port)).await?;
    stream.set_nodelay(true)?;
    Ok(Link {
        stream,
        buf: BytesMut::with_capacity(READ_ROOM),
        reused: false,
    })
}

impl Link {
    /// Read more from the upstream; 0 means it closed.
    pub async fn read_more(&mut self) -> io::Result<usize> {
        use tokio::io::AsyncReadExt;
        self.buf.reserve(READ_ROOM);
        self.stream.read_buf(&mut self.buf).await
    }
}
