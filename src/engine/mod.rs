//! The runbook engine: runs steps against a platform, with checks, a journal, a lock, dry
//! runs and resume.
