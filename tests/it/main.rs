//! Integration tests: one binary that drives the real `onebash` against real
//! git repos and a scripted OpenAI-compatible server on 127.0.0.1.

mod support;

mod agent_protocol;
mod anthropic_cache;
mod api_refusal;
mod audit;
mod benchmark_names;
mod ci_script;
mod clusters;
mod code_shape;
mod completions;
mod container;
mod datasets;
mod demo;
mod docs_links;
mod doctor;
mod dry_run;
mod exec_safety;
mod export;
mod harbor;
mod harbor_registry;
mod harbor_verifier;
mod history;
mod html;
mod hub_parity;
mod junit;
mod layers;
mod llama_server;
mod model_faults;
mod oci;
mod oci_registry;
mod old_run_folder;
mod patches;
mod pipeline;
mod predictions;
mod regrade;
mod replay;
mod report_by;
mod responses;
mod resume;
mod sandbox;
mod swebench;
mod swebench_family;
mod swebench_parity;
