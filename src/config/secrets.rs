//! The API keys of a run and the Hub's token ([`Secrets`]), taken out of
//! the process's environment before anything else runs, so that no command
//! a task starts can read one back; configuration reads them from here.

use crate::agent::provider::Provider;

/// The Hugging Face Hub's token (gated datasets), taken out of the
/// environment with the API keys: no command of the agent can read it.
const HF_TOKEN: &str = "HF_TOKEN";

/// The variables that hold keys, erased from the process at start-up: every
/// provider's key variable (the registry's), then [`HF_TOKEN`].
fn key_variables() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = Vec::new();
    for provider in Provider::ALL {
        let name = provider.info().api_key_env;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.push(HF_TOKEN);
    names
}

/// The API keys of a run, taken out of the process's environment before
/// anything else runs ([`Secrets::take`]): configuration reads them from
/// here, never from the environment.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    keys: Vec<(String, String)>,
}

impl Secrets {
    /// Takes every variable that holds an API key (the providers' own, and
    /// `extra`, a `--api-key-env` name) out of the environment: the bytes of
    /// `NAME=value` that /proc/<pid>/environ shows (the block the process
    /// started with) are overwritten, then the variable is removed. A
    /// child could otherwise read a key back from its parent's environ.
    ///
    /// # Safety
    ///
    /// The process must have one thread: this writes the environment block
    /// in place, which another thread could be reading. `main` calls it
    /// before the async runtime starts.
    pub unsafe fn take(extra: Option<&str>) -> Secrets {
        let mut keys = Vec::new();
        for name in key_variables().into_iter().chain(extra) {
            // SAFETY: single-threaded, as this function's contract says.
            if let Some(value) = unsafe { take_secret_env(name) } {
                keys.push((name.to_owned(), value));
            }
        }
        Secrets { keys }
    }

    /// `HF_TOKEN`, the Hub's token, when it was set.
    pub(crate) fn hf_token(&self) -> Option<String> {
        self.get(HF_TOKEN)
    }

    pub(crate) fn get(&self, name: &str) -> Option<String> {
        self.keys
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    }
}

/// Reads a secret from the environment and erases it from the process.
///
/// # Safety
///
/// As [`Secrets::take`]: one thread only.
unsafe fn take_secret_env(name: &str) -> Option<String> {
    let value = std::env::var(name).ok().filter(|v| !v.is_empty());
    let prefix = format!("{name}=");
    unsafe extern "C" {
        static mut environ: *mut *mut std::ffi::c_char;
    }
    // SAFETY: single-threaded (the caller's contract), so nothing reads or
    // changes the environment meanwhile. `environ` is a null-terminated
    // array of pointers to NUL-terminated strings owned by the process; we
    // only overwrite bytes inside those strings, never past their
    // terminator.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = std::ffi::CStr::from_ptr(*entry);
            let len = text.to_bytes().len();
            if text.to_bytes().starts_with(prefix.as_bytes()) {
                let start = (*entry).cast::<u8>().add(prefix.len());
                std::ptr::write_bytes(start, b'x', len - prefix.len());
            }
            entry = entry.add(1);
        }
        std::env::remove_var(name);
    }
    value
}
