"""Checks the deployment files in deploy/ say what the docs say they do.

Run: .venv/bin/python -m pytest -q deploy/tests/test_manifests.py (needs PyYAML).
Each test names the rule it holds; the files are parsed, not matched as text, except where a
setting's name or nginx's directives are the point.
"""

import ipaddress
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
COMPOSE = ROOT / "deploy" / "compose"

IMAGE_USER = 65532  # distroless "nonroot", the image's USER
SERVE_PORT = 8080  # the image's PASSKEYD_LISTEN


# --- loading ---------------------------------------------------------------------------------


def load_documents(path):
    with path.open() as file:
        return [document for document in yaml.safe_load_all(file) if document is not None]


def load_one(name):
    documents = load_documents(KUBERNETES / name)
    assert len(documents) == 1, f"{name} holds {len(documents)} documents, expected one"
    return documents[0]


@pytest.fixture(scope="module")
def secret():
    return load_one("secret.yaml")


@pytest.fixture(scope="module")
def deployment():
    return load_one("deployment.yaml")


@pytest.fixture(scope="module")
def service():
    return load_one("service.yaml")


@pytest.fixture(scope="module")
def job():
    return load_one("migration-job.yaml")


@pytest.fixture(scope="module")
def compose():
    return load_documents(COMPOSE / "compose.yaml")[0]


def pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def only_container(workload):
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1, "one container per pod"
    return containers[0]


def env_entry(container, name):
    entries = [entry for entry in container.get("env", []) if entry["name"] == name]
    assert len(entries) == 1, f"{name} is set {len(entries)} times on {container['name']}"
    return entries[0]


def workloads(deployment, job):
    return {"deployment": deployment, "migration job": job}


def proxy_port(compose):
    """The proxy's first published port, "[address:]host:container", as (host, container)."""
    *_, host, container = str(compose["services"]["proxy"]["ports"][0]).split(":")
    return host, container


def passkeyd_services(compose):
    """The compose services that serve passkeyd (run the passkeyd image with `serve`)."""
    image = compose["services"]["migrate"]["image"]
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("image") == image and service.get("command") == ["serve"]
    }


# --- every file --------------------------------------------------------------------------------


def deploy_files():
    return sorted(path for folder in (KUBERNETES, COMPOSE) for path in folder.iterdir() if path.is_file())


@pytest.mark.parametrize("path", [path for path in deploy_files() if path.suffix == ".yaml"], ids=lambda path: path.name)
def test_every_yaml_file_parses_to_at_least_one_document(path):
    assert load_documents(path), f"{path} is empty"


def test_kustomization_lists_exactly_the_yaml_files_beside_it():
    kustomization = load_one("kustomization.yaml")
    listed = kustomization["resources"]
    present = sorted(path.name for path in KUBERNETES.glob("*.yaml") if path.name != "kustomization.yaml")
    assert len(listed) == len(set(listed)), f"listed twice: {listed}"
    assert sorted(listed) == present


@pytest.mark.parametrize(
    ("file", "kind", "name"),
    [
        ("secret.yaml", "Secret", "passkeyd-database"),
        ("deployment.yaml", "Deployment", "passkeyd"),
        ("service.yaml", "Service", "passkeyd"),
        ("migration-job.yaml", "Job", "passkeyd-migrate"),
    ],
)
def test_each_kubernetes_file_holds_the_object_the_docs_name(file, kind, name):
    document = load_one(file)
    assert (document["kind"], document["metadata"]["name"]) == (kind, name)


def known_settings():
    """The environment variables the server reads: `env: "PASSKEYD_…"` in the Swift sources."""
    pattern = re.compile(r'env: "(PASSKEYD_[A-Z0-9_]+)"')
    return {name for path in (ROOT / "Sources").rglob("*.swift") for name in pattern.findall(path.read_text())}


def test_every_passkeyd_setting_the_deploy_files_name_is_one_the_server_reads():
    known = known_settings()
    # Guards the scan itself: a moved Sources folder must not make every name unknown unnoticed.
    assert "PASSKEYD_DATABASE_URL" in known and "PASSKEYD_TRUSTED_PROXIES" in known
    named = {}
    for path in deploy_files():
        for name in re.findall(r"PASSKEYD_[A-Z0-9_]+", path.read_text()):
            named.setdefault(name, path.relative_to(ROOT).as_posix())
    # A build argument (the commit --version names, read by scripts/prebuild), not a setting.
    named.pop("PASSKEYD_COMMIT", None)
    unknown = {name: where for name, where in named.items() if name not in known}
    assert not unknown, f"settings the server does not read: {unknown}"


# --- Kubernetes: the Deployment ------------------------------------------------------------------


def test_deployment_runs_two_replicas_and_rolls_without_taking_a_pod_away(deployment):
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_deployment_selector_matches_its_pod_labels(deployment):
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector == {"app.kubernetes.io/name": "passkeyd"}
    assert selector.items() <= labels.items()
    assert deployment["metadata"]["labels"]["app.kubernetes.io/name"] == "passkeyd"


def test_deployment_serves_on_a_container_port_named_http_at_8080(deployment):
    container = only_container(deployment)
    assert container.get("args", ["serve"]) == ["serve"]
    assert {"name": "http", "containerPort": SERVE_PORT} in [
        {"name": port.get("name"), "containerPort": port["containerPort"]} for port in container["ports"]
    ]


@pytest.mark.parametrize(
    ("probe", "paths"),
    [("livenessProbe", {"/healthz"}), ("readinessProbe", {"/readyz"}), ("startupProbe", {"/healthz", "/readyz"})],
)
def test_probes_ask_passkeyd_health_paths_on_a_named_container_port(deployment, probe, paths):
    container = only_container(deployment)
    check = container[probe]["httpGet"]
    assert check["path"] in paths
    assert check["port"] in {port.get("name") for port in container["ports"]}, "the probe's port names no container port"


def test_liveness_never_asks_readyz_so_a_database_outage_restarts_nothing(deployment):
    container = only_container(deployment)
    assert container["livenessProbe"]["httpGet"]["path"] != "/readyz"


def test_termination_grace_period_is_30_seconds(deployment):
    assert pod_spec(deployment)["terminationGracePeriodSeconds"] == 30


def test_deployment_refuses_to_serve_unmigrated_and_logs_json(deployment):
    container = only_container(deployment)
    assert env_entry(container, "PASSKEYD_MIGRATIONS")["value"] == "check"
    assert env_entry(container, "PASSKEYD_LOG_FORMAT")["value"] == "json"


def test_deployment_origins_are_https_on_the_rp_id_or_its_subdomains(deployment):
    container = only_container(deployment)
    rp_id = env_entry(container, "PASSKEYD_RP_ID")["value"]
    origins = [origin.strip() for origin in env_entry(container, "PASSKEYD_ORIGINS")["value"].split(",")]
    assert rp_id == "example.com"
    for origin in origins:
        parts = urlsplit(origin)
        assert parts.scheme == "https", f"{origin}: passkeys need https outside localhost"
        assert parts.hostname == rp_id or parts.hostname.endswith("." + rp_id), f"{origin} is not on {rp_id}"


# --- Kubernetes: what the Deployment and the Job share -----------------------------------------------


@pytest.mark.parametrize("kind", ["deployment", "migration job"])
def test_resources_request_cpu_and_memory_and_limit_memory(deployment, job, kind):
    resources = only_container(workloads(deployment, job)[kind])["resources"]
    assert {"cpu", "memory"} <= resources["requests"].keys()
    assert "memory" in resources["limits"]


@pytest.mark.parametrize("kind", ["deployment", "migration job"])
def test_pod_runs_as_the_image_nonroot_user_with_the_runtime_default_seccomp_profile(deployment, job, kind):
    context = pod_spec(workloads(deployment, job)[kind])["securityContext"]
    assert context["runAsNonRoot"] is True
    assert context["runAsUser"] == context["runAsGroup"] == context["fsGroup"] == IMAGE_USER
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}


@pytest.mark.parametrize("kind", ["deployment", "migration job"])
def test_container_cannot_escalate_write_its_root_or_keep_any_capability(deployment, job, kind):
    context = only_container(workloads(deployment, job)[kind])["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert context["capabilities"]["drop"] == ["ALL"]
    assert not context["capabilities"].get("add")
    assert context.get("privileged", False) is False


@pytest.mark.parametrize("kind", ["deployment", "migration job"])
def test_tmp_is_a_writable_empty_dir_since_the_root_is_read_only(deployment, job, kind):
    workload = workloads(deployment, job)[kind]
    mounts = {mount["mountPath"]: mount["name"] for mount in only_container(workload).get("volumeMounts", [])}
    assert "/tmp" in mounts
    volumes = {volume["name"]: volume for volume in pod_spec(workload)["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]


@pytest.mark.parametrize("kind", ["deployment", "migration job"])
def test_database_url_comes_from_the_secret_and_its_key(deployment, job, secret, kind):
    entry = env_entry(only_container(workloads(deployment, job)[kind]), "PASSKEYD_DATABASE_URL")
    assert "value" not in entry, "the URL holds the password: never inline it"
    reference = entry["valueFrom"]["secretKeyRef"]
    assert reference["name"] == secret["metadata"]["name"] == "passkeyd-database"
    assert reference["key"] in secret["stringData"]
    assert reference["key"] == "url"


def test_secret_url_is_a_postgres_url_placeholder_to_replace(secret):
    url = secret["stringData"]["url"]
    parts = urlsplit(url)
    assert parts.scheme == "postgres"
    assert parts.port == 5432 and parts.path.strip("/")
    assert "sslmode=" in parts.query
    assert "REPLACE" in (parts.password or ""), "the placeholder password must read as one"


def test_migration_job_runs_migrate_once_with_the_deployment_image(deployment, job):
    container = only_container(job)
    assert container["args"] == ["migrate"]
    assert container["image"] == only_container(deployment)["image"]
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert isinstance(job["spec"]["backoffLimit"], int) and job["spec"]["backoffLimit"] >= 0
    assert isinstance(job["spec"]["ttlSecondsAfterFinished"], int) and job["spec"]["ttlSecondsAfterFinished"] > 0


# --- Kubernetes: the Service --------------------------------------------------------------------


def test_service_selects_the_deployment_pods_and_not_the_migration_job(service, deployment, job):
    selector = service["spec"]["selector"]
    assert selector
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    job_labels = job["spec"]["template"]["metadata"].get("labels", {})
    assert not selector.items() <= job_labels.items(), "the Service would send requests to the migration pod"


def test_service_is_cluster_ip_on_80_to_a_named_container_port(service, deployment):
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP"
    (port,) = service["spec"]["ports"]
    assert port["port"] == 80
    assert isinstance(port["targetPort"], str), "name the port so a port change needs one edit"
    assert port["targetPort"] in {entry.get("name") for entry in only_container(deployment)["ports"]}


# --- compose --------------------------------------------------------------------------------------


def test_compose_runs_two_passkeyd_instances(compose):
    assert sorted(passkeyd_services(compose)) == ["passkeyd-1", "passkeyd-2"]


@pytest.mark.parametrize("name", ["passkeyd-1", "passkeyd-2"])
def test_each_instance_starts_after_migrate_completed_successfully_and_only_checks_migrations(compose, name):
    instance = compose["services"][name]
    assert instance["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert instance["environment"]["PASSKEYD_MIGRATIONS"] == "check"


def test_migrate_runs_migrate_once_postgres_is_healthy(compose):
    migrate = compose["services"]["migrate"]
    assert migrate["command"] == ["migrate"]
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in compose["services"]["postgres"]["healthcheck"]["test"]


def test_migrate_builds_from_the_repository_dockerfile_the_image_the_instances_run(compose):
    migrate = compose["services"]["migrate"]
    assert (COMPOSE / migrate["build"]["context"]).resolve() == ROOT
    assert migrate["build"]["dockerfile"] == "Dockerfile"
    assert migrate["image"] == "passkeyd:0.9.0"
    for instance in passkeyd_services(compose).values():
        assert instance["image"] == migrate["image"]
        assert "build" not in instance, "one build: the instances reuse migrate's image"


def test_instances_and_migrate_use_the_same_database(compose):
    users = ["migrate", *passkeyd_services(compose)]
    urls = {name: compose["services"][name]["environment"]["PASSKEYD_DATABASE_URL"] for name in users}
    assert len(set(urls.values())) == 1, urls
    assert urlsplit(next(iter(urls.values()))).hostname == "postgres"


def test_database_password_comes_from_one_env_variable_defaulting_to_change_me(compose):
    variable = "${POSTGRES_PASSWORD:-change-me}"
    postgres = compose["services"]["postgres"]
    assert postgres["image"] == "postgres:16-bookworm"
    assert postgres["environment"]["POSTGRES_PASSWORD"] == variable
    for name, service in compose["services"].items():
        url = service.get("environment", {}).get("PASSKEYD_DATABASE_URL")
        if url is not None:
            assert f":{variable}@" in url, f"{name}'s URL does not use the password variable"


def test_postgres_keeps_its_data_in_a_named_volume(compose):
    (mount,) = compose["services"]["postgres"]["volumes"]
    volume, target = mount.split(":")[:2]
    assert volume in compose["volumes"]
    assert target == "/var/lib/postgresql/data"


@pytest.mark.parametrize("name", ["passkeyd-1", "passkeyd-2"])
def test_each_instance_health_check_is_the_image_passkeyd_healthcheck(compose, name):
    healthcheck = compose["services"][name].get("healthcheck")
    if healthcheck is not None:  # absent: the image's own HEALTHCHECK, the same command
        assert healthcheck["test"] == ["CMD", "/usr/bin/passkeyd", "healthcheck"]


def test_trusted_proxy_is_the_proxy_fixed_address_in_the_subnet_and_outside_the_dynamic_range(compose):
    proxy_address = ipaddress.ip_address(compose["services"]["proxy"]["networks"]["passkeyd"]["ipv4_address"])
    (pool,) = compose["networks"]["passkeyd"]["ipam"]["config"]
    assert proxy_address in ipaddress.ip_network(pool["subnet"])
    # Docker hands other containers addresses from ip_range only, so none can take the proxy's.
    assert proxy_address not in ipaddress.ip_network(pool["ip_range"])
    for name, instance in passkeyd_services(compose).items():
        trusted = [address.strip() for address in instance["environment"]["PASSKEYD_TRUSTED_PROXIES"].split(",")]
        assert trusted == [str(proxy_address)], f"{name} trusts {trusted}"
        assert instance["networks"] == ["passkeyd"]


def test_proxy_publishes_on_loopback_only(compose):
    ports = compose["services"]["proxy"]["ports"]
    assert ports
    for port in ports:
        if isinstance(port, dict):
            assert port.get("host_ip") == "127.0.0.1", port
        else:
            assert str(port).startswith("127.0.0.1:"), f"{port} listens on every interface"


def test_proxy_is_nginx_with_nginx_conf_mounted_read_only(compose):
    proxy = compose["services"]["proxy"]
    assert proxy["image"] == "nginx:1.27-bookworm"
    assert "./nginx.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]


def test_local_try_out_origin_is_the_address_the_proxy_publishes(compose):
    published, _ = proxy_port(compose)
    for name, instance in passkeyd_services(compose).items():
        assert instance["environment"]["PASSKEYD_RP_ID"] == "localhost"
        assert instance["environment"]["PASSKEYD_ORIGINS"] == f"http://localhost:{published}", name


# --- nginx.conf -----------------------------------------------------------------------------------


def nginx_blocks():
    """nginx.conf as a tree: a list of (directive, arguments, children or None)."""
    text = re.sub(r"#[^\n]*", "", (COMPOSE / "nginx.conf").read_text())
    tokens = re.findall(r'"[^"]*"|[{};]|[^\s{};]+', text)
    stack, current, words = [], [], []
    for token in tokens:
        if token == ";":
            current.append((words[0], words[1:], None))
            words = []
        elif token == "{":
            block = (words[0], words[1:], [])
            current.append(block)
            stack.append(current)
            current, words = block[2], []
        elif token == "}":
            assert not words, f"unterminated directive {words}"
            current = stack.pop()
        else:
            words.append(token)
    assert not stack and not words, "unbalanced nginx.conf"
    return current


def find(blocks, directive, arguments=None):
    found = []
    for name, args, children in blocks:
        if name == directive and (arguments is None or args == arguments):
            found.append((name, args, children))
        if children:
            found.extend(find(children, directive, arguments))
    return found


def proxied_location():
    (location,) = find(nginx_blocks(), "location", ["/"])
    return location[2]


def test_nginx_upstream_names_exactly_the_passkeyd_services_on_8080(compose):
    (upstream,) = find(nginx_blocks(), "upstream", ["passkeyd"])
    servers = [args[0] for name, args, _ in upstream[2] if name == "server"]
    assert sorted(servers) == sorted(f"{name}:{SERVE_PORT}" for name in passkeyd_services(compose))
    (proxy_pass,) = [args for name, args, _ in proxied_location() if name == "proxy_pass"]
    assert proxy_pass == ["http://passkeyd"]


def test_nginx_sends_client_address_host_and_request_id():
    headers = {args[0]: args[1] for name, args, _ in proxied_location() if name == "proxy_set_header"}
    assert headers["X-Forwarded-For"] == "$proxy_add_x_forwarded_for"
    assert headers["Host"] == "$host"
    assert headers["X-Request-Id"] == "$request_id"


def test_nginx_retries_another_instance_only_on_error_or_timeout():
    (retry,) = [args for name, args, _ in proxied_location() if name == "proxy_next_upstream"]
    assert retry == ["error", "timeout"], "never retry a request an instance answered (a POST may have taken effect)"


def test_nginx_denies_metrics_to_everyone():
    (location,) = find(nginx_blocks(), "location", ["=", "/metrics"])
    assert location[2] == [("deny", ["all"], None)]


def test_nginx_listens_on_the_port_compose_publishes(compose):
    _, container_port = proxy_port(compose)
    listens = [args[0] for _, args, _ in find(nginx_blocks(), "listen")]
    assert listens == [container_port]
