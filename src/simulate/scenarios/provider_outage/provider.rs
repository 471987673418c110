//! The provider of `provider-outage` as a mechanism: it takes every call in and shares its
//! capacity among all the calls it holds at once (processor sharing, as a threaded server
//! shares its CPU), and a call not answered within its caller's timeout has failed (the
//! caller hangs up; the provider drops its work). Offered more than it can finish within
//! the timeout, every call gets too small a share to finish in time: it does no useful
//! work at all, which is the collapse, from the queue and the timeout rather than a rule.
//! Optionally it sheds instead: it refuses at once what would not fit.

/// One call the provider holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Job {
    pub client: u32,
    /// The first tick by whose start the call must have been answered.
    pub deadline: u64,
    /// Work still to do, in calls (a fresh call is 1).
    remaining: f64,
}

/// Work below this counts as done: the shares are sums of fractions of the capacity.
const DONE: f64 = 1e-9;

#[derive(Debug, Clone, Default)]
pub struct Provider {
    /// Calls' worth of work it does in a tick.
    capacity: f64,
    /// Ticks a caller waits for its answer.
    timeout: u64,
    shed: bool,
    held: Vec<Job>,
}

/// What became of the calls in one tick.
#[derive(Debug, Default)]
pub struct TickEnd {
    pub served: Vec<u32>,
    pub failed: Vec<u32>,
}

impl Provider {
    pub fn new(capacity_per_tick: u32, timeout_ticks: u64, shed: bool) -> Self {
        Provider {
            capacity: f64::from(capacity_per_tick),
            timeout: timeout_ticks.max(1),
            shed,
            held: Vec::new(),
        }
    }

    /// Calls taken in and not yet answered or failed.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.len()
    }

    /// Calls a shedding provider still admits: what its capacity finishes in a tick, less
    /// what it holds.
    pub fn room(&self) -> usize {
        (self.capacity as usize).saturating_sub(self.held.len())
    }

    /// Tick `now` of a provider that is up: `arriving` (in the order a shedding provider
    /// admits them) come in; it works for one tick; the calls it finished, and those whose
    /// callers stopped waiting, come out.
    pub fn tick(&mut self, now: u64, arriving: &[u32], out: &mut TickEnd) {
        let room = if self.shed { self.room() } else { usize::MAX };
        let (admitted, refused) = arriving.split_at(arriving.len().min(room));
        out.failed.extend_from_slice(refused);
        self.held.extend(admitted.iter().map(|&client| Job {
            client,
            deadline: now + self.timeout,
            remaining: 1.0,
        }));
        let done = share(&mut self.held, self.capacity);
        out.served.extend(self.held.drain(..done).map(|j| j.client));
        let late = |j: &Job| j.deadline <= now + 1;
        out.failed
            .extend(self.held.iter().filter(|j| late(j)).map(|j| j.client));
        self.held.retain(|j| !late(j));
    }

    /// The provider goes down (or is down): every call it holds, and every one arriving,
    /// fails at once.
    pub fn down(&mut self, arriving: &[u32], out: &mut TickEnd) {
        out.failed.extend(self.held.drain(..).map(|j| j.client));
        out.failed.extend_from_slice(arriving);
    }
}

/// One tick of processor sharing: `capacity` calls' worth of work split equally among the
/// jobs, a job leaving as soon as its work is done (its share then goes to the others).
/// Moves the finished jobs to the front and returns how many there are.
fn share(jobs: &mut [Job], mut capacity: f64) -> usize {
    // Least work left first; ties keep their arrival order.
    jobs.sort_by(|a, b| a.remaining.total_cmp(&b.remaining));
    // Work every job still held has been given so far this tick.
    let mut given = 0.0;
    let mut done = 0;
    while done < jobs.len() {
        let sharing = (jobs.len() - done) as f64;
        let need = jobs[done].remaining - given;
        if need * sharing <= capacity + DONE {
            capacity -= need * sharing;
            given += need;
            done += 1;
        } else {
            given += capacity / sharing;
            break;
        }
    }
    for j in &mut jobs[done..] {
        j.remaining -= given;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(p: &mut Provider, now: u64, arriving: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let mut out = TickEnd::default();
        p.tick(now, arriving, &mut out);
        (out.served, out.failed)
    }

    #[test]
    fn offered_its_capacity_it_answers_every_call_in_the_tick() {
        let mut p = Provider::new(8, 1, false);
        let calls: Vec<u32> = (0..8).collect();
        assert_eq!(tick(&mut p, 0, &calls), (calls.clone(), vec![]));
        assert_eq!(p.held(), 0);
    }

    #[test]
    fn offered_more_than_it_can_finish_in_the_timeout_it_answers_none() {
        let calls: Vec<u32> = (0..9).collect();
        let (served, failed) = tick(&mut Provider::new(8, 1, false), 0, &calls);
        assert!(served.is_empty());
        assert_eq!(failed, calls);
    }

    /// Over several ticks: with a 5-tick timeout, 40 calls at once each need 5 ticks of
    /// their share and all just make it; 41 all fail.
    #[test]
    fn the_collapse_point_is_capacity_times_timeout() {
        let run = |n: u32| {
            let mut p = Provider::new(8, 5, false);
            let mut out = TickEnd::default();
            p.tick(0, &(0..n).collect::<Vec<_>>(), &mut out);
            for now in 1..5 {
                p.tick(now, &[], &mut out);
            }
            (out.served.len(), out.failed.len(), p.held())
        };
        assert_eq!(run(40), (40, 0, 0));
        assert_eq!(run(41), (0, 41, 0));
    }

    #[test]
    fn a_shedding_provider_serves_its_capacity_and_refuses_the_rest_at_once() {
        let calls: Vec<u32> = (0..40).collect();
        let (served, failed) = tick(&mut Provider::new(8, 1, true), 0, &calls);
        assert_eq!(served, (0..8).collect::<Vec<_>>());
        assert_eq!(failed, (8..40).collect::<Vec<_>>());
    }

    #[test]
    fn a_finished_call_leaves_its_share_to_the_others() {
        let mut jobs: Vec<Job> = [1.0, 0.25, 1.0]
            .iter()
            .enumerate()
            .map(|(i, &r)| Job {
                client: i as u32,
                deadline: 9,
                remaining: r,
            })
            .collect();
        // 0.25 each to all three (0.75), then 1.25 split between the two left: 0.625 each.
        assert_eq!(share(&mut jobs, 2.0), 1);
        assert_eq!(jobs[0].client, 1);
        assert!((jobs[1].remaining - 0.125).abs() < 1e-12);
    }

    #[test]
    fn a_down_provider_fails_what_it_held_and_what_arrives() {
        let mut p = Provider::new(8, 5, false);
        tick(&mut p, 0, &(0..40).collect::<Vec<_>>());
        let mut out = TickEnd::default();
        p.down(&[40], &mut out);
        assert_eq!(out.failed.len(), 41);
        assert_eq!(p.held(), 0);
    }
}
