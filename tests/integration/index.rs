//! A Python package index of the test's own (PEP 503, the "simple" API), so that a test's
//! `pip install` reaches no public registry: one pure-Python wheel, assembled by the test
//! (a zip of the module and its `.dist-info`, made with Python's `zipfile`), served on
//! 127.0.0.1.

use std::process::Command;

use tempfile::TempDir;

use crate::python::run;
use crate::util::Server;

/// A served index of one package; the server lives as long as it.
pub struct Index {
    pub server: Server,
    /// The wheel's file name, as the index links it.
    pub wheel: String,
    _dir: TempDir,
}

impl Index {
    /// An index of `name` at `version`, a single module `name.py` holding `source`. `name`
    /// is as pip asks for it (lower case, no `_` or `.`).
    pub fn of(name: &str, version: &str, source: &str) -> Index {
        let dir = tempfile::Builder::new()
            .prefix("cordon-index-")
            .tempdir()
            .unwrap();
        let build = dir.path().join("build");
        let info = format!("{name}-{version}.dist-info");
        let module = format!("{name}.py");
        let mut files = vec![
            (module.clone(), source.to_string()),
            (
                format!("{info}/METADATA"),
                format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"),
            ),
            (
                format!("{info}/WHEEL"),
                "Wheel-Version: 1.0\nGenerator: cordon-tests\nRoot-Is-Purelib: true\n\
                 Tag: py3-none-any\n"
                    .to_string(),
            ),
        ];
        // The wheel's files, RECORD itself included, without hashes: pip installs it so.
        let record = format!("{info}/RECORD");
        let listed = files.iter().map(|(file, _)| file).chain([&record]);
        let listed: String = listed.map(|file| format!("{file},,\n")).collect();
        files.push((record, listed));
        for (file, content) in files {
            let path = build.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let wheel = format!("{name}-{version}-py3-none-any.whl");
        let project = dir.path().join("simple").join(name);
        std::fs::create_dir_all(&project).unwrap();
        run(
            Command::new("python3")
                .args(["-m", "zipfile", "-c"])
                .arg(project.join(&wheel))
                .args([&module, &info])
                .current_dir(&build),
            "assemble a wheel with python3's zipfile",
        );
        std::fs::write(
            project.join("index.html"),
            format!("<a href=\"{wheel}\">{wheel}</a>\n"),
        )
        .unwrap();
        Index {
            server: Server::files(dir.path()),
            wheel,
            _dir: dir,
        }
    }
}
