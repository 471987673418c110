//! What the source finds out about the data before reading signals: the scrape interval
//! (given, from the target list, or from the spacing of the samples; see [`super::interval`])
//! and whether every role selects something.

use super::interval::{self, ScrapeInterval, SPACING_LOOKBACK};
use super::{template, to_metric_error, ApiData, Labels, PromqlError, PromqlSource};
use crate::metrics::source::MetricError;
use std::time::{Duration, SystemTime};

impl PromqlSource {
    /// Instant query of a range selector (`up[10m]`): each series' raw sample times.
    async fn sample_times(
        &self,
        query: &str,
        at: Option<SystemTime>,
    ) -> Result<Vec<(Labels, Vec<f64>)>, PromqlError> {
        let params = self.instant_params(at);
        match self.call("/api/v1/query", query, &params).await? {
            ApiData::Matrix(items) => Ok(items
                .into_iter()
                .map(|i| (i.metric, i.values.iter().map(|(t, _)| *t).collect()))
                .collect()),
            _ => Err(PromqlError::Query {
                query: query.to_string(),
                error_type: "bad_data".into(),
                message: "expected a range vector".into(),
            }),
        }
    }

    /// `GET /api/v1/targets?state=active`.
    async fn active_targets(&self) -> Result<Vec<interval::ActiveTarget>, PromqlError> {
        let url = format!("{}/api/v1/targets?state=active", self.base);
        let resp = self
            .client
            .get(&url)
            .send()
            .await
            .map_err(|e| self.transport_error(&url, e))?;
        let caps = crate::util::http_body::BodyCaps::new(super::MAX_ANSWER_BYTES, self.timeout);
        let body = crate::util::http_body::read_response_text(resp, caps)
            .await
            .map_err(|e| PromqlError::Unreachable {
                url: url.clone(),
                message: e.to_string(),
            })?;
        interval::parse_targets(&body).map_err(|message| PromqlError::Unreachable { url, message })
    }

    /// The `up` selectors of the declared roles (all of `up` without roles).
    fn up_selectors(&self) -> Vec<String> {
        if self.roles.is_empty() {
            return vec!["up".into()];
        }
        self.roles.values().map(|m| format!("up{{{m}}}")).collect()
    }

    /// The scrape interval of the data: given, or found once and kept. `at` is the
    /// instant judged (None: now, when the target list is asked first).
    pub async fn scrape_interval(
        &self,
        at: Option<SystemTime>,
    ) -> Result<ScrapeInterval, MetricError> {
        self.scrape
            .get_or_try_init(|| self.find_scrape_interval(at))
            .await
            .cloned()
    }

    async fn find_scrape_interval(
        &self,
        at: Option<SystemTime>,
    ) -> Result<ScrapeInterval, MetricError> {
        let selectors = self.up_selectors();
        if at.is_none() {
            if let Some(found) = self.interval_from_targets(&selectors).await? {
                return Ok(found);
            }
        }
        let lookback = template::format_range(SPACING_LOOKBACK);
        let span = crate::util::duration::format(SPACING_LOOKBACK);
        let mut longest: Option<Duration> = None;
        for sel in &selectors {
            let series = self
                .sample_times(&format!("{sel}[{lookback}]"), at)
                .await
                .map_err(|e| to_metric_error("(scrape interval)", e))?;
            for (_, times) in series {
                longest = longest.max(interval::spacing(&times));
            }
        }
        let when = at.map_or("now".to_string(), |t| {
            humantime::format_rfc3339_seconds(t).to_string()
        });
        match longest {
            Some(value) => Ok(ScrapeInterval {
                value,
                from: format!(
                    "spacing of the samples of {} in the {span} before {when}",
                    selectors.join(", ")
                ),
            }),
            None => Err(MetricError::NoScrapeInterval {
                message: format!(
                    "fewer than two samples of {} in the {span} before {when}",
                    selectors.join(", ")
                ),
            }),
        }
    }

    /// The longest `scrapeInterval` of the active targets `selectors` select, if the
    /// target list has every one of them.
    async fn interval_from_targets(
        &self,
        selectors: &[String],
    ) -> Result<Option<ScrapeInterval>, MetricError> {
        let mut wanted = Vec::new();
        for sel in selectors {
            let series = self
                .query_series(sel, None)
                .await
                .map_err(|e| to_metric_error("(scrape interval)", e))?;
            for (labels, _) in series {
                if let (Some(j), Some(i)) = (labels.get("job"), labels.get("instance")) {
                    wanted.push((j.clone(), i.clone()));
                }
            }
        }
        if wanted.is_empty() {
            return Ok(None);
        }
        let Ok(targets) = self.active_targets().await else {
            return Ok(None);
        };
        Ok(
            interval::interval_of(&targets, &wanted).map(|value| ScrapeInterval {
                value,
                from: format!(
                    "scrapeInterval of the {} target(s) {} select (/api/v1/targets)",
                    wanted.len(),
                    selectors.join(", ")
                ),
            }),
        )
    }

    /// Each declared role must select at least one target at `at`: a role that matches
    /// nothing would otherwise read as zero replicas, zero requests. Returns each role
    /// with how many `up` series it selects.
    pub async fn check_roles(
        &self,
        at: Option<SystemTime>,
    ) -> Result<Vec<(String, usize)>, MetricError> {
        let mut out = Vec::new();
        for (role, matchers) in &self.roles {
            let q = format!("up{{{matchers}}}");
            let series = self
                .query_series(&q, at)
                .await
                .map_err(|e| to_metric_error(&format!("(role {role})"), e))?;
            if series.is_empty() {
                return Err(MetricError::RoleMissing {
                    role: role.clone(),
                    matchers: matchers.clone(),
                });
            }
            out.push((role.clone(), series.len()));
        }
        Ok(out)
    }
}
