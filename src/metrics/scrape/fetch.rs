//! Where scrape targets come from and how their pages are fetched: a fixed list of URLs
//! (`--metrics-url ROLE=URL`) or whatever a platform lists (local processes, pods; see
//! `platform::PlatformFetch`). One small trait, so the scrape source does not care which.

use crate::metrics::scrape::ScrapeEndpoint;
use crate::metrics::source::MetricError;
use crate::util::http_body::{read_response_text, BodyCaps};
use std::time::Duration;

/// Lists targets and fetches one target's `/metrics` text.
#[async_trait::async_trait]
pub trait Fetch: Send + Sync {
    async fn targets(&self) -> Result<Vec<ScrapeEndpoint>, MetricError>;
    async fn fetch(&self, target: &ScrapeEndpoint) -> Result<String, MetricError>;
}

/// Fetch fixed URLs over HTTP.
pub struct UrlFetch {
    targets: Vec<ScrapeEndpoint>,
    client: reqwest::Client,
    timeout: Duration,
}

impl UrlFetch {
    pub fn new(targets: Vec<ScrapeEndpoint>, timeout: Duration) -> Result<Self, MetricError> {
        let client = crate::util::http::client(timeout).map_err(|e| MetricError::Fetch {
            target: "http client".into(),
            message: e.to_string(),
        })?;
        Ok(UrlFetch {
            targets,
            client,
            timeout,
        })
    }
}

#[async_trait::async_trait]
impl Fetch for UrlFetch {
    async fn targets(&self) -> Result<Vec<ScrapeEndpoint>, MetricError> {
        Ok(self.targets.clone())
    }

    async fn fetch(&self, target: &ScrapeEndpoint) -> Result<String, MetricError> {
        let url = &target.locator;
        let fail = |message: String| MetricError::Fetch {
            target: url.clone(),
            message,
        };
        let resp = self
            .client
            .get(url)
            .header(
                "accept",
                "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
            )
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    MetricError::Timeout {
                        target: url.clone(),
                        after: self.timeout,
                    }
                } else {
                    fail(e.to_string())
                }
            })?;
        if !resp.status().is_success() {
            return Err(fail(format!("HTTP {}", resp.status())));
        }
        read_response_text(resp, BodyCaps::metrics_page(self.timeout))
            .await
            .map_err(|e| fail(e.to_string()))
    }
}
