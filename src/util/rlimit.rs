//! The open-file limit. A server inherits the soft limit of whoever started it (often
//! 1024), far below what the kernel allows it (the hard limit): with a thousand slow
//! clients it then runs out of descriptors and locks every new client out. Raising the
//! soft limit to the hard one needs no privilege, so servers do it at start.

use std::io;

/// The open-file limit before and after [`raise_nofile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFile {
    pub before: u64,
    pub after: u64,
    pub hard: u64,
}

/// Raise the soft open-file limit (RLIMIT_NOFILE) to the hard limit. Idempotent.
pub fn raise_nofile() -> io::Result<NoFile> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass; no other memory is touched.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let before = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads the struct we pass.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(NoFile {
        before,
        after: lim.rlim_cur,
        hard: lim.rlim_max,
    })
}

/// The soft open-file limit in force now.
pub fn nofile() -> io::Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as in raise_nofile.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raising_reaches_the_hard_limit_and_stays_there() {
        let first = raise_nofile().unwrap();
        assert_eq!(first.after, first.hard);
        assert!(first.after >= first.before);
        let again = raise_nofile().unwrap();
        assert_eq!(again.before, again.after);
        assert_eq!(nofile().unwrap(), again.after);
    }
}
