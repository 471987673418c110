//! Which CPU each proxy worker thread runs on, and which CPU a connection's packets
//! arrive on.
//!
//! When the gate runs exactly one worker per CPU it may use, each worker is bound to its
//! own CPU, the way nginx's `worker_cpu_affinity auto` and HAProxy's `cpu-map` do. That is
//! what lets [`super::workers`] serve a connection on the CPU its packets arrive on
//! ([`incoming_cpu`]): a worker that may move has no CPU of its own to match. It also
//! keeps Linux from stacking both workers on one CPU: a woken thread is placed near the
//! thread that woke it, and on a loaded machine `perf sched timehist` showed a worker and
//! both load-generator threads on CPU 0 for seconds while CPU 1 ran other work. Binding
//! alone did not move the refusing tail on a quiet machine (docs/benchmarks.md); serving
//! each connection on its own CPU did.
//!
//! With fewer workers than usable CPUs (a CPU quota on a larger node, or `--workers` set
//! lower) the gate cannot know which CPUs are its own and binds nothing: a worker bound
//! to a CPU some other process keeps busy could not leave it.

use std::io;

/// The CPUs this thread may run on, in order, or `None` when the kernel will not say.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: `set` is a plain bit array the kernel fills; its size is passed with it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE, the size of `set`.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect();
    (!cpus.is_empty()).then_some(cpus)
}

/// The CPU for each of `workers` workers: one each when they are exactly as many as the
/// CPUs `allowed`, else none.
pub fn plan(allowed: &[usize], workers: usize) -> Option<Vec<usize>> {
    (workers > 1 && allowed.len() == workers).then(|| allowed.to_vec())
}

/// The CPU that last received `socket`'s packets (`SO_INCOMING_CPU`): for a connection
/// from this machine, the CPU its client thread ran on; from a network card with several
/// receive queues, the CPU of the connection's queue.
pub fn incoming_cpu(socket: &impl std::os::fd::AsRawFd) -> Option<usize> {
    let mut cpu: libc::c_int = -1;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `cpu` and `len` are valid for the kernel to write one int and its length.
    let rc = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_INCOMING_CPU,
            (&mut cpu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0)
        .then_some(cpu)
        .and_then(|c| usize::try_from(c).ok())
}

/// Keep the calling thread on `cpu` only.
pub fn bind_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is past the largest CPU number this build knows"),
        ));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE; the set and its size are passed together.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_worker_per_usable_cpu_is_bound_one_to_each() {
        assert_eq!(plan(&[0, 1], 2), Some(vec![0, 1]));
        assert_eq!(plan(&[2, 5, 7], 3), Some(vec![2, 5, 7]));
    }

    #[test]
    fn fewer_or_more_workers_than_usable_cpus_or_a_single_one_are_not_bound() {
        assert_eq!(plan(&[0, 1, 2, 3], 2), None);
        assert_eq!(plan(&[0, 1], 3), None);
        assert_eq!(plan(&[0], 1), None);
        assert_eq!(plan(&[], 0), None);
    }

    #[test]
    fn this_thread_reports_at_least_one_cpu() {
        let cpus = allowed_cpus().expect("sched_getaffinity answers on Linux");
        assert!(!cpus.is_empty());
    }
}
