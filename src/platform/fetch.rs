//! Scraping through a platform: the metric source asks the platform which endpoints exist
//! now (local processes, pods) and fetches each page through it (directly, or through the
//! API server's pod proxy).

use super::Platform;
use crate::metrics::scrape::{Fetch, ScrapeEndpoint};
use crate::metrics::source::MetricError;
use std::sync::Arc;

/// Fetch through a platform (local processes, or pods via the API server).
pub struct PlatformFetch {
    pub platform: Arc<dyn Platform>,
}

#[async_trait::async_trait]
impl Fetch for PlatformFetch {
    async fn targets(&self) -> Result<Vec<ScrapeEndpoint>, MetricError> {
        self.platform
            .scrape_endpoints()
            .await
            .map_err(|e| MetricError::Fetch {
                target: self.platform.target_id(),
                message: e.to_string(),
            })
    }

    async fn fetch(&self, target: &ScrapeEndpoint) -> Result<String, MetricError> {
        self.platform
            .scrape(target)
            .await
            .map_err(|e| MetricError::Fetch {
                target: target.locator.clone(),
                message: e.to_string(),
            })
    }
}
