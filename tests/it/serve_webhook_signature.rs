//! Signed webhooks against the real `recover serve`: the signature covers a timestamp and
//! the body, is good within five minutes of the receiver's clock, and only once. A
//! captured request sent again, a stale one, or one signed over the body alone is 401.

use recover::serve::auth::sign;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::fixture;
use crate::support::serve::{config_acting_on_nothing, start, Auth, Http};

const SECRET: &str = "signature-secret-0123456789";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn a_signature_is_good_once_within_its_window() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_acting_on_nothing(dir.path(), Auth::Hmac(SECRET), "");
    let serve = start(&cfg, None).await;
    let base = serve.base.clone();
    let http = Http::default();
    let url = format!("{base}/alerts");
    let post = |headers: Vec<(&'static str, String)>, body: Vec<u8>| {
        let (http, url) = (http.clone(), url.clone());
        async move {
            let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http.post_json(&url, &h, body).await.0
        }
    };
    let body = fixture("alertmanager/resolved.json").into_bytes();
    let signed = |ts: u64| {
        vec![
            ("x-recover-timestamp", ts.to_string()),
            ("x-recover-signature", sign(SECRET, ts, &body)),
        ]
    };

    let fresh = now();
    assert_eq!(
        post(signed(fresh), body.clone()).await,
        200,
        "a fresh signature"
    );
    assert_eq!(
        post(signed(fresh), body.clone()).await,
        401,
        "the same request again"
    );
    assert_eq!(
        post(signed(now() - 600), body.clone()).await,
        401,
        "signed ten minutes ago"
    );
    assert_eq!(
        post(signed(now() + 600), body.clone()).await,
        401,
        "signed ten minutes ahead"
    );
    let no_time = vec![("x-recover-signature", sign(SECRET, fresh, &body))];
    assert_eq!(post(no_time, body.clone()).await, 401, "no timestamp");
    let later = now() + 1;
    let mut moved = signed(fresh);
    moved[0].1 = later.to_string();
    assert_eq!(
        post(moved, body.clone()).await,
        401,
        "a timestamp changed after signing"
    );
    assert_eq!(
        post(signed(fresh + 1), body.clone()).await,
        200,
        "a new signature"
    );
}
