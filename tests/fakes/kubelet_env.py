"""The environment the kubelet gives a container: the pod spec's `env` plus the Service "links".

A model written from the kubelet's source, for the rules a serving pod's environment depends on. Read in
kubernetes/kubernetes (the repository is too large to fetch here, so no release tag could be read; the
files are the search index's copies, named by commit):
- pkg/kubelet/kubelet_pods.go @ 001a80e975bb880d0fe60b304d30950fe661f278 (master, after v1.34: it has the
  EnvFiles gate), getServiceEnvVarMap and makeEnvironmentVariables: which Services count and who wins;
- pkg/kubelet/envvars/envvars.go, FromServices and makeLinkVariables: the variables of one Service. The
  upstream copy in the index (@ 3085dc64145a749514d6c6c6c08f3f6ed91296e7) builds `tcp://ip:port` by hand;
  later copies (e.g. the fork sanposhiho/kubernetes @ 059ce4e8a1d958959595b970acaf846259348518) use
  net.JoinHostPort, which brackets an IPv6 address. Both name the same variables; this model brackets.
- pkg/apis/core/v1/helper/helpers.go, IsServiceIPSet: ClusterIP "None" (headless) or "" (ExternalName)
  gives no variables;
- pkg/apis/core/v1/defaults.go, SetDefaults_Pod: a nil enableServiceLinks becomes
  v1.DefaultEnableServiceLinks, true.
Not modelled, and refused rather than guessed: `envFrom`, `valueFrom` and `$(VAR)` expansion in values
(kubelet_pods.go expands them against the container's env and the service variables). The image's own ENV,
which the runtime lays under these, is not the kubelet's and is not modelled either.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# kubelet_pods.go: masterServices = {"kubernetes"}, taken from the default namespace whatever the pod's
# enableServiceLinks (the API server's own Service: https on 443).
MASTER_NAMESPACE = "default"
MASTER_SERVICES = frozenset({"kubernetes"})
HEADLESS = "None"
DEFAULT_ENABLE_SERVICE_LINKS = True


@dataclass(frozen=True)
class ServicePort:
    port: int
    name: str = ""
    protocol: str = "TCP"


@dataclass(frozen=True)
class Service:
    name: str
    namespace: str
    cluster_ip: str
    """The allocated ClusterIP; "None" for a headless Service, "" for an ExternalName one."""
    ports: tuple[ServicePort, ...]

    @classmethod
    def from_manifest(cls, manifest: dict[str, Any], cluster_ip: str) -> Service:
        """A Service as the API server keeps it once it has given it `cluster_ip` (see allocate_cluster_ips)."""
        ports = tuple(ServicePort(port=int(p["port"]), name=p.get("name", ""), protocol=p.get("protocol") or "TCP")
                      for p in manifest["spec"]["ports"])
        return cls(manifest["metadata"]["name"], manifest["metadata"].get("namespace", "default"), cluster_ip, ports)


def master_service(cluster_ip: str) -> Service:
    """default/kubernetes, the API server's Service: the kubelet links it into every pod."""
    return Service("kubernetes", MASTER_NAMESPACE, cluster_ip, (ServicePort(443, "https"),))


def allocate_cluster_ips(manifests: Iterable[dict[str, Any]], service_range: str = "10.96.0.0/16") -> list[Service]:
    """What the API server does on create (kubernetes/api core/v1 types.go, ServiceSpec.ClusterIP's doc): a
    ClusterIP, NodePort or LoadBalancer Service without one gets a free address of the range, "None" stays
    headless, and an ExternalName Service has none. Addresses are handed out in order; the first is left
    for default/kubernetes (master_service), which kube-apiserver gives the range's first address."""
    hosts = ipaddress.ip_network(service_range).hosts()
    next(hosts)
    services = []
    for manifest in manifests:
        spec = manifest["spec"]
        if spec.get("type") == "ExternalName":
            cluster_ip = ""
        else:
            cluster_ip = spec.get("clusterIP") or str(next(hosts))
        services.append(Service.from_manifest(manifest, cluster_ip))
    return services


def variable_name(name: str) -> str:
    """envvars.go makeEnvVariableName: upper case, '-' to '_' (nothing else: Service and port names are
    DNS labels, so no dots and no other characters)."""
    return name.replace("-", "_").upper()


def _host_port(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ipaddress.ip_address(ip).version == 6 else f"{ip}:{port}"


def service_variables(service: Service) -> dict[str, str]:
    """envvars.go FromServices for one Service: {NAME}_SERVICE_HOST, {NAME}_SERVICE_PORT (the first port),
    {NAME}_SERVICE_PORT_{PORTNAME} for each named port, then the Docker-link ones: {NAME}_PORT (the first
    port's URL) and, for every port, {NAME}_PORT_{port}_{PROTO} with its _PROTO, _PORT and _ADDR. The port is
    the Service's `port`, not its targetPort; the protocol defaults to TCP."""
    if service.cluster_ip in (HEADLESS, ""):
        return {}
    prefix = variable_name(service.name)
    out = {f"{prefix}_SERVICE_HOST": service.cluster_ip, f"{prefix}_SERVICE_PORT": str(service.ports[0].port)}
    for port in service.ports:
        if port.name:
            out[f"{prefix}_SERVICE_PORT_{variable_name(port.name)}"] = str(port.port)
    for index, port in enumerate(service.ports):
        proto = port.protocol.lower()
        url = f"{proto}://{_host_port(service.cluster_ip, port.port)}"
        if index == 0:
            out[f"{prefix}_PORT"] = url
        each = f"{prefix}_PORT_{port.port}_{port.protocol.upper()}"
        out.update({each: url, f"{each}_PROTO": proto, f"{each}_PORT": str(port.port),
                    f"{each}_ADDR": service.cluster_ip})
    return out


def linked_services(services: Iterable[Service], namespace: str, enable_service_links: bool | None) -> list[Service]:
    """kubelet_pods.go getServiceEnvVarMap: the Services a pod in `namespace` is given. Those without a
    ClusterIP are skipped; default/kubernetes always counts; the pod's own namespace only with service links
    on (nil means on, as the API server defaults it). A Service of the pod's namespace named `kubernetes`
    takes the master's place."""
    links = DEFAULT_ENABLE_SERVICE_LINKS if enable_service_links is None else enable_service_links
    chosen: dict[str, Service] = {}
    for service in services:
        if service.cluster_ip in (HEADLESS, ""):
            continue
        if service.namespace == MASTER_NAMESPACE and service.name in MASTER_SERVICES:
            chosen.setdefault(service.name, service)
        elif service.namespace == namespace and links:
            chosen[service.name] = service
    return list(chosen.values())


def container_environment(pod_spec: dict[str, Any], container: dict[str, Any], namespace: str,
                          services: Iterable[Service]) -> dict[str, str]:
    """kubelet_pods.go makeEnvironmentVariables: the container's own `env`, then every service variable it
    does not set itself (its own value wins). Where two Services write one name, Go's map order decides
    upstream; here the later Service does."""
    if container.get("envFrom"):
        raise NotImplementedError("envFrom is not modelled")
    own: dict[str, str] = {}
    for variable in container.get("env", []):
        value = variable.get("value", "")
        if "valueFrom" in variable or "$" in value:
            raise NotImplementedError(f"{variable['name']}: valueFrom and $(VAR) expansion are not modelled")
        own[variable["name"]] = value
    linked: dict[str, str] = {}
    for service in linked_services(services, namespace, pod_spec.get("enableServiceLinks")):
        linked.update(service_variables(service))
    return {**linked, **own}
