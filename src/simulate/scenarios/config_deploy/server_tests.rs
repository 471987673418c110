//! The model server's tests: its cost under overload and cold caches, shedding, the
//! restart, answering at the end of a request's work, and a drain that keeps the
//! answerable requests.

use super::*;

fn cfg(shedding: bool) -> ServerConfig {
    ServerConfig {
        per_tick: 2.0,
        cold_factor: 0.5,
        warmup_ticks: 100,
        warm_after_requests: 0,
        overload_factor: 4.0,
        shedding,
        honour_deadline: false,
        timeout_ticks: 10,
        job_ticks: None,
    }
}

/// Requests served over the ticks `ticks`.
fn served(s: &mut Server, ticks: std::ops::Range<u32>) -> u32 {
    let mut n = 0;
    for t in ticks {
        s.step(t, |_| n += 1);
    }
    n
}

fn req(i: u32) -> Req {
    Req {
        client: i,
        seq: 0,
        sent: 0,
    }
}

#[test]
fn overloaded_queue_costs_k_times_the_work() {
    let mut s = Server::new(cfg(false));
    for i in 0..100 {
        s.arrive(req(i), 0);
    }
    // 100 queued > 2 * 10 servable in time: each costs 4, so 2 per tick serves one per 2 ticks.
    assert_eq!(served(&mut s, 0..10), 5);
    assert!(s.overloaded());
}

#[test]
fn shedding_keeps_the_queue_within_what_is_served_in_time() {
    let mut s = Server::new(cfg(true));
    let shed = (0..100)
        .filter(|i| s.arrive(req(*i), 0) == Arrival::Shed)
        .count();
    assert_eq!(s.queue_len(), 20);
    assert_eq!(shed, 80);
}

#[test]
fn restart_loses_the_queue_and_comes_back_cold() {
    let mut s = Server::new(cfg(false));
    s.arrive(req(1), 0);
    assert_eq!(s.go_down(10), 1);
    assert_eq!(s.arrive(req(2), 5), Arrival::Refused);
    assert_eq!(s.warm_fraction(10), 0.5);
    assert_eq!(s.warm_fraction(60), 0.75);
    assert_eq!(s.warm_fraction(500), 1.0);
}

/// As the demo service: warmth comes with the work done since the restart (the cost
/// multiplier falls linearly from 2 to 1), not with time; a warm step makes it whole.
#[test]
fn warms_with_its_work_and_at_once_when_warmed() {
    let mut s = Server::new(ServerConfig {
        warm_after_requests: 10,
        ..cfg(false)
    });
    for i in 0..3 {
        s.arrive(req(i), 0);
    }
    assert_eq!(s.restart(0).len(), 3);
    assert_eq!(s.warm_fraction(1_000), 0.5, "time alone does not warm it");
    for i in 0..5 {
        s.arrive(req(i), 1_000);
    }
    assert_eq!(served(&mut s, 1_000..1_010), 5);
    assert!((s.warm_fraction(1_010) - 1.0 / 1.5).abs() < 1e-9);
    s.warm();
    assert_eq!(s.warm_fraction(1_010), 1.0);
}

/// A drain keeping the answerable requests (4 slots of 4 ticks each, timeout 10
/// ticks, at tick 10): of the live requests, the youngest five are answered before
/// their deadlines (the four oldest of them at 14, the fifth at 18); a sixth, sent at
/// 3, would be answered at 14, past its deadline at 13. The five stay queued in FIFO
/// order; the older ones and the one whose client left are taken out to be errored.
#[test]
fn a_keep_answerable_drain_keeps_the_youngest_answerable_and_errors_the_rest() {
    let sent = [0, 3, 5, 6, 7, 8, 9, 10];
    // One slot, 4 ticks a request, the requests sent at `sent` queued.
    let queued = || {
        let mut s = Server::new(ServerConfig {
            per_tick: 1.0,
            job_ticks: Some(4.0),
            ..cfg(false)
        });
        for (i, &t) in sent.iter().enumerate() {
            s.arrive(
                Req {
                    client: i as u32,
                    seq: 0,
                    sent: t,
                },
                t,
            );
        }
        s
    };
    let mut s = queued();
    let gone = 4; // the one sent at 7: its client gave up
    let (out, kept) = s.drain_keeping(10, 1, 1.0, |r| r.client != gone);
    let clients = |v: Vec<Req>| v.iter().map(|r| r.client).collect::<Vec<_>>();
    assert_eq!(clients(out), [0, 1, 4]);
    assert_eq!(kept, 5);
    assert_eq!(clients(s.queued().copied().collect()), [2, 3, 5, 6, 7]);
    // And the server answers each of them before its client's deadline.
    let mut done = Vec::new();
    for t in 10..30 {
        s.step(t, |r| done.push((t, r)));
    }
    assert_eq!(done.len(), 5);
    assert!(done.iter().all(|(t, r)| *t < r.sent + 10), "{done:?}");
    // Spread over two replicas (every other request on each, two slots each), the
    // same requests are answerable: each replica keeps its own youngest.
    let mut s = queued();
    let (out, kept) = s.drain_keeping(10, 2, 1.0, |r| r.client != gone);
    assert_eq!((clients(out), kept), (vec![0, 1, 4], 5));
}

/// As the demo service's pool: a request is answered at the end of its work, whose
/// cost is fixed when a slot takes it (cold and overloaded here: 4 x 2 = 8 times 5
/// ticks), and it warms the service when it is done, not when it starts.
#[test]
fn answers_at_the_end_of_its_work_priced_when_taken() {
    let mut s = Server::new(ServerConfig {
        warm_after_requests: 10,
        job_ticks: Some(5.0),
        ..cfg(false)
    });
    s.restart(0);
    for i in 0..30 {
        s.arrive(req(i), 0);
    }
    let mut done = Vec::new();
    for t in 0..44 {
        s.step(t, |r| done.push((t, r.client)));
        if t == 42 {
            assert!(done.is_empty(), "{done:?}");
            assert_eq!(s.warm_fraction(t), 0.5, "nothing done yet: still cold");
        }
    }
    // 30 queued > 1 x 10 servable in time: overloaded, each costs 4 of the 1 a tick
    // a cold server has; the first is taken at tick 3 and answered 40 ticks later.
    assert_eq!(done, vec![(43, 0)]);
    assert_eq!(s.queue_len(), 30 - 11);
}
