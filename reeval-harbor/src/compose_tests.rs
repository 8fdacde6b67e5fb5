use super::*;
use reeval_core::environment::ImageSpec;

/// An `environment/` directory with a Dockerfile and `db/Dockerfile`.
fn env_dir() -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("reeval-compose-{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir.join("db")).unwrap();
    std::fs::write(dir.join("Dockerfile"), "FROM x\n").unwrap();
    std::fs::write(dir.join("db/Dockerfile"), "FROM x\n").unwrap();
    std::fs::write(dir.join("db.env"), "FROM_FILE=1\nPASSWORD=file\n").unwrap();
    dir
}

fn host(name: &str) -> Option<String> {
    match name {
        "DB_PASSWORD" => Some("s3cret".into()),
        "EMPTY" => Some(String::new()),
        "FROM_HOST" => Some("h".into()),
        _ => None,
    }
}

fn read_ok(text: &str) -> (Compose, PathBuf) {
    let dir = env_dir();
    let compose = read("org/task", &dir, text, &host).unwrap_or_else(|e| panic!("{e}"));
    (compose, dir)
}

fn read_err(text: &str) -> String {
    read("org/task", &env_dir(), text, &host).unwrap_err().to_string()
}

#[test]
fn services_beside_main_are_read_with_the_keys_real_tasks_use() {
    let (c, dir) = read_ok(
        r#"
version: "3.8"
services:
  main:
    image: ${MAIN_IMAGE_NAME}
    build:
      context: ${CONTEXT_DIR}
    depends_on:
      db:
        condition: service_healthy
    environment:
      DATABASE_URL: postgres://app:${DB_PASSWORD}@db:5432/app
  db:
    build: ./db
    env_file: db.env
    environment:
      - PASSWORD=${DB_PASSWORD}
      - FROM_HOST
      - NOT_ON_HOST
    command: postgres -c "log_statement=all"
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U app"]
      interval: 1m30s
      timeout: 500ms
      retries: 5
      start_period: 10s
    ports: ["5432:5432", "127.0.0.1:8080:80/tcp", {target: 9000}, "7000-7002"]
    expose: [6000]
    restart: unless-stopped
    container_name: database
    networks:
      default:
        aliases: [pg]
  web:
    image: "nginx:${TAG:-1.27}"
    depends_on: [db, main]
    mem_limit: 512m
    cpus: "0.5"
    x-note: ignored
x-shared: { a: 1 }
networks:
  default: {}
"#,
    );
    assert_eq!(c.main_env, [("DATABASE_URL".into(), "postgres://app:s3cret@db:5432/app".into())]);
    let db = &c.services[0];
    assert_eq!(db.name, "db");
    assert_eq!(db.image, ImageSpec::Dockerfile(dir.join("db/Dockerfile")));
    assert_eq!(
        db.env,
        [
            ("FROM_FILE".to_string(), "1".to_string()),
            ("PASSWORD".into(), "file".into()),
            ("PASSWORD".into(), "s3cret".into()),
            ("FROM_HOST".into(), "h".into()),
        ],
        "env_file first, `environment` over it; a bare name is the host's, when set"
    );
    assert_eq!(db.command.as_deref().unwrap(), ["postgres", "-c", "log_statement=all"]);
    let h = db.healthcheck.as_ref().unwrap();
    assert_eq!(h.test, ["CMD-SHELL", "pg_isready -U app"]);
    assert_eq!(h.interval, Some(Duration::from_secs(90)));
    assert_eq!(h.timeout, Some(Duration::from_millis(500)));
    assert_eq!((h.retries, h.start_period), (Some(5), Some(Duration::from_secs(10))));
    let mut ports = db.ports.clone();
    ports.sort();
    assert_eq!(ports, [80, 5432, 6000, 9000], "container ports; a range is not waited for");
    assert_eq!(db.aliases, ["database", "pg"]);
    let web = &c.services[1];
    assert_eq!(web.image, ImageSpec::From("nginx:1.27".into()));
    assert_eq!(web.depends_on, [("db".to_string(), Condition::Started)], "main is dropped");
    assert_eq!(web.limits.memory_bytes, 512 << 20);
    assert_eq!(web.limits.nano_cpus, 500_000_000);
}

#[test]
fn unsupported_keys_are_refused_naming_the_service_and_the_key() {
    let cases = [
        (
            "services:\n  db:\n    image: x\n    volumes: [\"data:/data\"]\n",
            "service db: volumes: `data` is no volume declared in the top-level `volumes`",
        ),
        (
            "services:\n  db:\n    image: x\n    privileged: true\n",
            "service db: key `privileged` is not supported",
        ),
        (
            "services:\n  main:\n    network_mode: none\n",
            "service main: key `network_mode` is not supported",
        ),
        (
            "services:\n  main:\n    image: ubuntu:24.04\n",
            "service main: key `image` is supported only as ${MAIN_IMAGE_NAME}",
        ),
        (
            "services:\n  db:\n    build:\n      context: .\n      args: {A: b}\n",
            "service db: key `build.args` is not supported",
        ),
        (
            "services:\n  db:\n    build:\n      context: .\n      dockerfile: db/Dockerfile\n",
            "must be at the top of its build context",
        ),
        ("services:\n  db: {}\n", "service db: has neither `image` nor `build`"),
        (
            "services:\n  db:\n    image: x\nsecrets:\n  s: {file: ./s}\n",
            "key `secrets` is not supported",
        ),
        (
            "services:\n  db:\n    image: x\nnetworks:\n  shared:\n    external: true\n",
            "network shared: an external network is not supported",
        ),
        (
            "services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n",
            "a cycle",
        ),
        (
            "services:\n  a:\n    image: x\n    depends_on: {b: {condition: service_healthy}}\n  b:\n    image: x\n",
            "has no healthcheck",
        ),
        (
            "services:\n  db:\n    image: ${NEEDED:?set NEEDED}\n",
            "the variable NEEDED is required: set NEEDED",
        ),
        ("services: [", "does not parse"),
    ];
    for (text, expected) in cases {
        let e = read_err(text);
        assert!(e.starts_with("failed to load Harbor task org/task: docker-compose.yaml "), "{e}");
        assert!(e.contains(expected), "{expected:?} not in {e}");
    }
}

#[test]
fn interpolation_is_composes() {
    let sub = |s: &str| substitute(s, &host).unwrap();
    assert_eq!(sub("a $$ b"), "a $ b");
    assert_eq!(sub("${DB_PASSWORD}-$DB_PASSWORD-${NOPE}"), "s3cret-s3cret-");
    assert_eq!(sub("${EMPTY:-d} ${EMPTY-d} ${NOPE-d}"), "d  d");
    assert_eq!(sub("$ 5"), "$ 5");
    assert!(substitute("${EMPTY:?no}", &host).is_err());
    assert_eq!(sub("${EMPTY?no}"), "");
}

#[test]
fn durations_and_sizes_parse_as_compose_writes_them() {
    let d = |s: &str| duration(&Value::String(s.into())).unwrap();
    assert_eq!(d("1h2m3s"), Duration::from_secs(3723));
    assert_eq!(d("250ms"), Duration::from_millis(250));
    assert_eq!(d("5"), Duration::from_secs(5));
    assert!(duration(&Value::String("5x".into())).is_err());
    assert_eq!(bytes(&Value::String("1g".into())).unwrap(), 1 << 30);
    assert_eq!(bytes(&serde_json::json!(1024)).unwrap(), 1024);
}

#[test]
fn a_named_volume_is_shared_by_a_sidecar_and_main() {
    let (c, _) = read_ok(
        "services:\n  main:\n    volumes: [\"logs:/var/log/tool:ro\"]\n  tool:\n    image: x\n    volumes:\n      - type: volume\n        source: logs\n        target: /out\nvolumes:\n  logs: {}\n",
    );
    assert_eq!(c.main_mounts, [Mount::volume("logs", "/var/log/tool").read_only()]);
    assert_eq!(c.services[0].mounts, [Mount::volume("logs", "/out")]);
}
