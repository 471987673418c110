//! A command whose output goes into a pipe that closes early (`recover runbooks list |
//! head`) must stop quietly, as Unix tools do. Rust ignores SIGPIPE, so `println!` then
//! panics on the closed pipe: the commands that only print restore the default action
//! (the process ends when nobody reads any more). The servers keep SIGPIPE ignored: a
//! client that hangs up must cost them one write error, not the process.

/// End the process quietly when stdout or stderr is a pipe whose reader went away.
pub fn end_quietly_on_closed_pipe() {
    // SAFETY: signal() with SIG_DFL installs no handler code; it only resets the action
    // for SIGPIPE, before any thread that writes to a pipe exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
