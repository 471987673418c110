//! The retry loop's count of attempts answerable in time, reading where the servers stood
//! (`RetryLoop::servers`): on the state of a real rehearsal whose servers were all busy
//! finishing abandoned work at the scrape, the old count (every server free right after
//! the scrape) called every attempt out answerable; the servers' own free times hold some
//! back. Apart from [`super::retry_tests`] so that each reads in one sitting.

use super::retry_model::ladder;
use super::*;

/// The lead's trace: 1 replica, 9 servers, `s` = 40 ms, `T` = `d` = 1 s, scraped 20 ms
/// before the runbook; 158 attempts out with their time left spread over 1 s; the demo's
/// restart (cold factor 3.76, warm after 300, warm call 0.5 s), start-to-ready unknown (0).
fn trace(servers: Option<ServersAt>) -> RetryLoop {
    let left: Vec<f64> = (0..158).map(|i| (f64::from(i) + 0.5) / 158.0).collect();
    RetryLoop {
        retry_delay_s: 1.0,
        client_timeout_s: 1.0,
        scraped_before_s: 0.02,
        in_flight: 158.0,
        replicas: 1,
        concurrency: 9,
        service_time_s: 0.04,
        phases: Some(ClientPhases {
            waiting_next: Ladder::default(),
            in_flight_left: ladder(&left),
        }),
        servers,
        restart: Restart {
            start_to_ready_s: None,
            cold_factor: 3.76,
            warm_after: 300,
            warm_s: 0.5,
        },
    }
}

/// The 9 servers busy for 0.1-0.25 s (jobs started at the overloaded cost), read on the
/// ladder at their buckets' lower edges.
fn busy(read_apart_s: f64) -> ServersAt {
    ServersAt {
        by_replica: vec![[0.1, 0.125, 0.15, 0.15, 0.175, 0.2, 0.2, 0.225, 0.25]
            .map(|free_s| BusyServer { free_s, live: true })
            .to_vec()],
        idle: 0,
        read_apart_s,
        read_first: false,
        hold_over: None,
    }
}

/// Every server free right after the scrape answers 25 each before 1 s and 9 every 40 ms
/// from the start: more than the 158 deadlines need, none held back. The servers busy
/// until 0.1-0.25 s answer nothing before 0.1 s (16 deadlines there) and 9 in all by
/// 0.175 s (28 there): 19 are held back (12 with the pages read 10 ms apart, which may
/// give each server one more answer), and still more than 100 are answerable.
#[test]
fn servers_busy_with_abandoned_work_hold_back_the_attempts_due_before_they_free() {
    let old = trace(None);
    assert_eq!(old.held_back(), 0.0);
    let new = trace(Some(busy(0.0)));
    let held = new.held_back();
    assert_eq!(held, 19.0);
    assert!(new.answerable_in_time() > 100.0);
    // The pages read apart within the probe only add answers, never remove any.
    let apart = trace(Some(busy(0.01))).held_back();
    assert_eq!(apart, 12.0);
    // Read first (the probe's order), a server read busy cannot have answered once more
    // before the clients were read: only its job's end moves up to 10 ms sooner.
    let first = ServersAt {
        read_first: true,
        ..busy(0.01)
    };
    let held_first = trace(Some(first)).held_back();
    assert!(held_first > apart && held_first <= held, "{held_first}");
}

/// A server whose job in service ends after its client stops waiting answers nobody at
/// that end: with every one of the 9 abandoned, each answers one fewer by any deadline,
/// so more attempts are held back than with the same servers possibly live.
#[test]
fn a_server_finishing_abandoned_work_answers_one_fewer() {
    let live = trace(Some(busy(0.0)));
    let mut gone = busy(0.0);
    for b in gone.by_replica.iter_mut().flatten() {
        b.live = false;
    }
    let gone = trace(Some(gone));
    assert!(
        gone.held_back() > live.held_back(),
        "{} vs {}",
        gone.held_back(),
        live.held_back()
    );
    assert_eq!(
        live.answerable_in_time() - gone.answerable_in_time(),
        gone.held_back() - live.held_back()
    );
}

/// A server read idle answers a service time after the read at the soonest; a restart
/// that is ready at once and warm at once puts every server there too, so it changes
/// nothing; a busy ladder missing leaves the old count exactly.
#[test]
fn idle_servers_and_a_warm_restart_count_from_a_service_time_after_the_scrape() {
    let idle = ServersAt {
        by_replica: vec![],
        idle: 9,
        read_apart_s: 0.0,
        read_first: false,
        hold_over: None,
    };
    let lp = trace(Some(idle.clone()));
    // floor(D / s) per server against ceil(D / s): one fewer before each deadline off the
    // grid of s.
    assert!(lp.answerable_in_time() <= trace(None).answerable_in_time());
    let warm = RetryLoop {
        restart: Restart::default(),
        scraped_before_s: 0.0,
        ..trace(Some(busy(0.0)))
    };
    let as_idle = RetryLoop {
        scraped_before_s: 0.0,
        ..trace(Some(idle))
    };
    assert_eq!(warm.answerable_in_time(), as_idle.answerable_in_time());
}

/// The restart's count: ready at 0.02 s, round costs `s x m(9 k / 300)` until the warm
/// call lands at 0.52 s, then `s` apart.
#[test]
fn a_cold_restart_answers_as_the_lockstep_greedy_says() {
    let lp = trace(None);
    assert_eq!(lp.restart_answers(0.1), 0.0);
    // 0.02 + 0.1504 = 0.1704: the first round.
    assert_eq!(lp.restart_answers(0.171), 1.0);
    let warm = RetryLoop {
        restart: Restart {
            warm_after: 0,
            ..lp.restart.clone()
        },
        ..lp.clone()
    };
    // Warm at once: s apart from ready.
    assert_eq!(warm.restart_answers(1.0), 24.0);
    assert!(lp.restart_answers(1.0) < 24.0);
}

/// One server read idle (the service's pages read first), 40 ms a job, the lead's trace
/// otherwise, with the jobs' overrun as measured (`hold_over`).
fn one_server(hold_over: Option<HoldOver>) -> RetryLoop {
    RetryLoop {
        replicas: 1,
        concurrency: 1,
        servers: Some(ServersAt {
            by_replica: vec![],
            idle: 1,
            read_apart_s: 0.0,
            read_first: true,
            hold_over,
        }),
        ..trace(None)
    }
}

fn over(mean_ms: f64, sd_ms: f64) -> Option<HoldOver> {
    Some(HoldOver {
        mean_s: mean_ms / 1000.0,
        sd_s: sd_ms / 1000.0,
    })
}

/// The service's measured overrun: 1 s to answer in. At cost alone 25 jobs fit; 1 ms over
/// each with no spread leaves 24 (25 take 1.025 s); with a 0.5 ms spread the 25 may come
/// in 7.5 ms under their mean's 25 ms, still over, and 24 stay; a spread wide enough that
/// three of it over 25 jobs cover their mean's sum (1.67 ms and more) takes the overrun as
/// possibly none, and the count is the cost's alone.
#[test]
fn a_measured_overrun_counts_only_what_a_run_of_jobs_cannot_come_in_under() {
    assert_eq!(one_server(None).jobs_within(1.0), 25.0);
    assert_eq!(one_server(over(1.0, 0.0)).jobs_within(1.0), 24.0);
    assert_eq!(one_server(over(1.0, 0.5)).jobs_within(1.0), 24.0);
    assert_eq!(one_server(over(1.0, 2.0)).jobs_within(1.0), 25.0);
    assert_eq!(one_server(over(1.0, 0.0)).jobs_within(0.0), 0.0);
}

/// 25 attempts out whose clients all wait until 1 s, on that one server: at cost alone
/// all 25 are answerable and none is held back; overrunning 1 ms a job (the spread of a
/// uniform 0-2 ms overrun, 0.58 ms), the 25th is not, and its client is held back; a
/// spread too wide to lean on holds back none again.
#[test]
fn the_servers_overrun_holds_back_the_attempts_it_makes_late() {
    let due = |hold_over| RetryLoop {
        in_flight: 25.0,
        phases: Some(ClientPhases {
            waiting_next: Ladder::default(),
            in_flight_left: ladder(&[1.0; 25]),
        }),
        ..one_server(hold_over)
    };
    assert_eq!(due(None).held_back(), 0.0);
    assert_eq!(due(over(1.0, 0.58)).held_back(), 1.0);
    assert_eq!(due(over(1.0, 2.0)).held_back(), 0.0);
}
