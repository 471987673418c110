//! Runbooks: versioned YAML documents naming signals, detection, plan and steps, loaded
//! and validated (file:line:column and field path) before anything runs.
