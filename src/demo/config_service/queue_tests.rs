//! The queue's decision logic, tested exactly: what a drain keeps, what a request costs,
//! when the service counts as overloaded.

use super::*;

fn model() -> CostModel {
    CostModel {
        concurrency: 4,
        service_time: Duration::from_millis(40),
        cold_factor: 1.5,
        overload_factor: 3.0,
        warm_after_requests: 300,
        client_timeout: Duration::from_secs(2),
    }
}

#[test]
fn the_overrun_is_the_mean_hold_beyond_the_cost() {
    let mut o = Overrun::default();
    assert_eq!(o.mean(), Duration::ZERO);
    o.record(Duration::from_millis(41), Duration::from_millis(40));
    o.record(Duration::from_millis(43), Duration::from_millis(40));
    // Done early: nothing over, still a job.
    o.record(Duration::from_millis(39), Duration::from_millis(40));
    assert_eq!(o.mean(), Duration::from_millis(4) / 3);
    assert_eq!(o.jobs(), 3);
    // Overruns 1, 3 and 0 ms: mean 4/3 ms, sample variance (1/9 + 25/9 + 16/9) / 2 ms².
    let sd_ms = o.sd_s() * 1000.0;
    assert!((sd_ms - (21.0_f64 / 9.0).sqrt()).abs() < 1e-6, "{sd_ms}");
    assert_eq!(Overrun::default().sd_s(), 0.0);
}

/// One server at 40 ms a job, 25 live jobs whose clients give up in 1.01 s: all 25
/// are answered by 1 s as costed, but a job that holds its server 1 ms longer than its
/// cost leaves the 25th answered at 1.025 s, after its client left: the drain keeps 24. A busy server is free that much later too.
#[test]
fn a_drain_counts_the_measured_overrun_in_each_jobs_cost() {
    let now = Moment::now();
    let cost = Duration::from_millis(40);
    let keeps = |overrun: Overrun| {
        let mut q = FifoQueue::default();
        let mut waiting = Vec::new();
        for _ in 0..25 {
            let (tx, rx) = oneshot::channel();
            waiting.push(rx);
            q.push(Job::new(
                now.instant,
                Some(now.wall + Duration::from_millis(1010)),
                tx,
            ));
        }
        let at = Answerable::at(now, Duration::from_secs(1), cost, overrun, &[None]);
        q.drain_keeping(&at);
        q.len()
    };
    assert_eq!(keeps(Overrun::default()), 25);
    let mut late = Overrun::default();
    late.record(Duration::from_millis(41), cost);
    assert_eq!(keeps(late), 24);
    let busy = Answerable::at(
        now,
        Duration::from_secs(1),
        cost,
        late,
        &[Some(now.instant + cost)],
    );
    assert_eq!(busy.cost, Duration::from_millis(41));
    assert_eq!(busy.free_in, [Duration::from_millis(41)]);
}

#[test]
fn cost_multiplies_cold_and_overload() {
    let m = model();
    assert_eq!(m.cost(1.0, false, 1.0), Duration::from_millis(40));
    assert_eq!(m.cost(0.0, false, 1.0), Duration::from_millis(60));
    assert_eq!(m.cost(1.0, true, 1.0), Duration::from_millis(120));
    assert_eq!(m.cost(0.0, true, 1.0), Duration::from_millis(180));
    assert_eq!(m.cost(0.5, false, 1.0), Duration::from_millis(50));
    // Five times slower (a bad node, a noisy neighbour): every request costs 5x.
    assert_eq!(m.cost(1.0, false, 5.0), Duration::from_millis(200));
}

#[test]
fn warms_by_serving_or_by_admin() {
    let m = model();
    assert_eq!(m.warm_fraction(0, false), 0.0);
    assert_eq!(m.warm_fraction(150, false), 0.5);
    assert_eq!(m.warm_fraction(10_000, false), 1.0);
    assert_eq!(m.warm_fraction(0, true), 1.0);
}

#[test]
fn overload_threshold_is_what_fits_in_the_client_timeout() {
    let m = model();
    // Warm: 100 req/s * 2 s = 200 requests fit.
    assert!(!m.overloaded(200, 1.0, 1.0));
    assert!(m.overloaded(201, 1.0, 1.0));
    // Cold: 66.7 req/s * 2 s = 133 fit.
    assert!(!m.overloaded(133, 0.0, 1.0));
    assert!(m.overloaded(134, 0.0, 1.0));
    // Five times slower: 20 req/s * 2 s = 40 fit.
    assert!(!m.overloaded(40, 1.0, 5.0));
    assert!(m.overloaded(41, 1.0, 5.0));
}

#[test]
fn queue_is_fifo_and_drains_everything() {
    let mut q = FifoQueue::default();
    let mut receivers = Vec::new();
    for i in 0..3u64 {
        let (tx, rx) = oneshot::channel();
        receivers.push(rx);
        q.push(Job::new(
            Instant::now(),
            Some(SystemTime::UNIX_EPOCH + Duration::from_millis(i)),
            tx,
        ));
    }
    let first = q.pop().expect("a job");
    assert_eq!(first.deadline, Some(SystemTime::UNIX_EPOCH));
    assert_eq!(q.drain_all().len(), 2);
    assert!(q.is_empty());
}

#[test]
fn deadline_expiry() {
    let (tx, _rx) = oneshot::channel();
    let now = SystemTime::now();
    let job = Job::new(Instant::now(), Some(now - Duration::from_millis(1)), tx);
    assert!(job.expired(now));
    let (tx, _rx) = oneshot::channel();
    let job = Job::new(Instant::now(), None, tx);
    assert!(!job.expired(now));
}

/// The queue of the drain tests, oldest first: (deadline from now, or `None` for
/// queued 0.5 s ago without `x-deadline-ms`; client still there).
fn queue_at(
    now: Moment,
    jobs: &[(Option<f64>, bool)],
) -> (FifoQueue, Vec<oneshot::Receiver<Reply>>) {
    let mut q = FifoQueue::default();
    let mut waiting = Vec::new();
    for &(deadline, there) in jobs {
        let (tx, rx) = oneshot::channel();
        if there {
            waiting.push(rx);
        }
        q.push(Job::new(
            now.instant - Duration::from_millis(500),
            deadline.map(|s| now.wall + Duration::from_secs_f64(s)),
            tx,
        ));
    }
    (q, waiting)
}

fn left(q: &mut FifoQueue, now: Moment) -> Vec<Option<f64>> {
    std::iter::from_fn(|| q.pop())
        .map(|j| {
            j.deadline
                .map(|d| d.duration_since(now.wall).unwrap().as_secs_f64())
        })
        .collect()
}

#[test]
fn a_drain_keeps_the_youngest_live_jobs_answered_in_time() {
    let now = Moment {
        instant: Instant::now(),
        wall: SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    };
    // Oldest first: live (10 s left), gone, deadline passed just now, live without a
    // header (queued 0.5 s ago, 2 s timeout: 1.5 s left), live 1.25 s, gone, live 2 s.
    let jobs = [
        (Some(10.0), true),
        (Some(10.0), false),
        (Some(0.0), true),
        (None, true),
        (Some(1.25), true),
        (Some(5.0), false),
        (Some(2.0), true),
    ];
    let (mut q, _waiting) = queue_at(now, &jobs);
    // One server, free in 0.25 s, 0.5 s a request: the last three live ones are
    // answered at 0.75, 1.25 and 1.75 s, each by its deadline; a fourth would put the
    // 1.25 s one at 1.75 s.
    let at = Answerable {
        now,
        client_timeout: Duration::from_secs(2),
        cost: Duration::from_millis(500),
        free_in: vec![Duration::from_millis(250)],
    };
    let dropped = q.drain_keeping(&at);
    let dropped: Vec<Option<f64>> = dropped
        .iter()
        .map(|j| {
            j.deadline
                .map(|d| d.duration_since(now.wall).unwrap().as_secs_f64())
        })
        .collect();
    assert_eq!(dropped, [Some(10.0), Some(10.0), Some(0.0), Some(5.0)]);
    assert_eq!(left(&mut q, now), [None, Some(1.25), Some(2.0)]);

    // With a 0.4 s timeout the headerless one's client has given up: it is dropped and
    // no longer stands ahead, so the oldest live one is answered first, at 0.75 s.
    let (mut q, _waiting) = queue_at(now, &jobs);
    let short = Answerable {
        client_timeout: Duration::from_millis(400),
        ..at.clone()
    };
    assert_eq!(q.drain_keeping(&short).len(), 4);
    assert_eq!(left(&mut q, now), [Some(10.0), Some(1.25), Some(2.0)]);

    // Two idle servers answer all four live ones in time; none idle or none at all
    // answers none.
    let (mut q, _waiting) = queue_at(now, &jobs);
    let two = Answerable {
        free_in: vec![Duration::ZERO; 2],
        ..at.clone()
    };
    assert_eq!(q.drain_keeping(&two).len(), 3);
    assert_eq!(q.len(), 4);
    let (mut q, _waiting) = queue_at(now, &jobs);
    let none = Answerable {
        free_in: Vec::new(),
        ..at
    };
    assert_eq!(q.drain_keeping(&none).len(), jobs.len());
    assert!(q.is_empty());
}

/// A request a drain kept is late once its client stops waiting before it is
/// answered (deadline passed or hung up); one no drain kept is never counted.
#[test]
fn a_kept_request_answered_after_its_client_stopped_waiting_is_late() {
    let now = Moment::now();
    let (mut q, mut waiting) = queue_at(now, &[(Some(2.0), true), (Some(2.0), true)]);
    let at = Answerable {
        now,
        client_timeout: Duration::from_secs(1),
        cost: Duration::from_millis(500),
        free_in: vec![Duration::ZERO],
    };
    assert!(q.drain_keeping(&at).is_empty());
    let timeout = at.client_timeout;
    let (first, second) = (q.pop().unwrap(), q.pop().unwrap());
    assert!(first.kept && second.kept);
    let later = Moment {
        instant: now.instant + Duration::from_secs(2),
        wall: now.wall + Duration::from_secs(2),
    };
    assert!(!first.kept_late(now, timeout));
    assert!(first.kept_late(later, timeout), "deadline passed");
    drop(waiting.remove(1));
    assert!(second.kept_late(now, timeout), "client gone");
    let (tx, _rx) = oneshot::channel();
    let never_kept = Job::new(now.instant, Some(now.wall), tx);
    assert!(!never_kept.kept_late(later, timeout));
}

#[test]
fn a_client_waits_until_its_deadline_and_while_connected() {
    let now = Moment::now();
    let (tx, rx) = oneshot::channel();
    let job = Job::new(now.instant, Some(now.wall + Duration::from_secs(3)), tx);
    let timeout = Duration::from_secs(1);
    assert_eq!(job.waits_for(now, timeout), Some(Duration::from_secs(3)));
    let later = Moment {
        instant: now.instant + Duration::from_secs(3),
        wall: now.wall + Duration::from_secs(3),
    };
    assert_eq!(job.waits_for(later, timeout), None, "deadline reached");
    drop(rx);
    assert_eq!(job.waits_for(now, timeout), None, "client gone");
    let (tx, _rx) = oneshot::channel();
    let job = Job::new(now.instant, None, tx);
    assert_eq!(job.waits_for(now, timeout), Some(timeout));
    assert_eq!(job.waits_for(later, timeout), None);
}
