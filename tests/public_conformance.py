"""Calls every operation Capstan serves that the public API's own description
(../shared/reference/public-api.yaml) describes, on a rich hierarchy (every service kind, every
variable scope, every provider's credentials, members between two signed-in users), with the
bodies the public clients send, and validates each answer against the description: the schema
of the operation's answer, found by its method and path template, with its required members,
nullability and enums. What real clients decode, checked the way they decode it. Members sent
are checked to come back as stored (and through an environment clone). It fails on an operation
Capstan serves (its /openapi.json) that the description describes but this run never called.

    python3 tests/public_conformance.py BASE_URL TOKEN PUBLIC_API_YAML

With CAPSTAN_JWT_HS256_SECRET set (the server's), it also acts as signed-in users.

Reading the description: `nullable` becomes a JSON-schema null type; `oneOf` is read as `anyOf`,
because the description's variants overlap (the helm variant of DeploymentHistoryServiceDetails
requires nothing, so every object matches it and no answer could match exactly one).
"""
import base64, hashlib, hmac, http.server, json, os, re, sys, threading, time, urllib.request, uuid
import yaml
from jsonschema import Draft7Validator

BASE, TOKEN, REFERENCE = sys.argv[1], sys.argv[2], sys.argv[3]
ref = yaml.safe_load(open(REFERENCE))
# When the server verifies HS256 Bearer JWTs with this secret, the run also acts as a signed-in user.
JWT_SECRET = os.environ.get('CAPSTAN_JWT_HS256_SECRET')


def jwt(secret, subject):
    enc = lambda b: base64.urlsafe_b64encode(b).rstrip(b'=').decode()
    head = enc(json.dumps({'alg': 'HS256', 'typ': 'JWT'}).encode())
    body = enc(json.dumps({'sub': subject, 'exp': int(time.time()) + 3600}).encode())
    sig = hmac.new(secret.encode(), f'{head}.{body}'.encode(), hashlib.sha256).digest()
    return f'{head}.{body}.{enc(sig)}'


def conv(s):
    if isinstance(s, dict):
        s = {k: conv(v) for k, v in s.items() if not k.startswith('x-')}
        if '$ref' in s:
            return {'$ref': '#/definitions/' + s['$ref'].split('/')[-1]}
        if 'oneOf' in s:
            s['anyOf'] = s.pop('oneOf')
        if s.get('nullable'):
            s.pop('nullable')
            if 'type' in s: s['type'] = [s['type'], 'null']
            elif 'enum' in s: s['enum'] = s['enum'] + [None]
            else: s = {'anyOf': [s, {'type': 'null'}]}
        if 'enum' in s and isinstance(s.get('type'), list) and None not in s['enum'] and 'null' in s['type']:
            s['enum'] = s['enum'] + [None]
        s.pop('discriminator', None); s.pop('example', None)
        return s
    if isinstance(s, list): return [conv(x) for x in s]
    return s


defs = {k: conv(v) for k, v in ref['components']['schemas'].items()}
operations = {}
for template, item in ref['paths'].items():
    # Every path parameter of these operations is a UUID.
    pattern = '^' + re.sub(r'\{[^}]+\}', '[0-9a-fA-F-]{36}', template) + '$'
    for method, op in item.items():
        if isinstance(op, dict) and 'responses' in op:
            operations[(method.upper(), template)] = (re.compile(pattern), op)

failures, checked = [], set()


def find(method, path):
    bare = path.split('?')[0]
    matches = [(t, op) for (m, t), (p, op) in operations.items() if m == method and p.match(bare)]
    # The most literal template wins (/environment/deploymentStatus over /environment/{id}).
    matches.sort(key=lambda x: x[0].count('{'))
    return matches[0] if matches else (None, None)


def call(method, path, body=None, expect=None, agent=None, bearer=None):
    """Calls an operation, checks its status is a success (or `expect`), validates the answer
    against the description's schema for that status, and returns the parsed body."""
    headers = {'Authorization': ('Bearer ' + bearer) if bearer else ('Token ' + TOKEN), 'Content-Type': 'application/json'}
    if agent: headers['User-Agent'] = agent
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    value = json.loads(raw) if raw else None
    template, op = find(method, path)
    name = f'{method} {template or path}'
    if template is None:
        # Served by Capstan beyond the description: checked for success only.
        name = f'{method} {path.split("?")[0]} (not described)'
    ok = (status == expect) if expect else 200 <= status < 300
    if not ok:
        print(f'FAIL {name}: status {status} {raw[:300]!r}'); failures.append(name)
        return value
    checked.add(name)
    if op is None or not (200 <= status < 300):
        return value
    responses = op['responses']
    answer = responses.get(str(status)) or next((r for c, r in responses.items() if c.startswith('2') and r), None)
    schema = ((answer or {}).get('content') or {}).get('application/json', {}).get('schema')
    if schema is None:
        return value
    v = Draft7Validator({'definitions': defs, **conv(schema)})
    errs = list(v.iter_errors(value))
    print(('ok   ' if not errs else 'FAIL ') + name)
    for e in errs[:5]: print('     ', list(e.absolute_path), e.message[:240])
    if errs: failures.append(name)
    return value


def settle(path, member='deployment_requests_count'):
    # Capstan's ?wait= answers once the state has settled; polling is the fallback it must spare.
    s = call('GET', path + '?wait=30')
    node = s.get('environment', s) if isinstance(s, dict) else {}
    if node.get(member) == 0: return s
    print(f'FAIL {path}?wait=30 answered before the state settled'); failures.append('wait ' + path)
    for _ in range(1500):
        s = call('GET', path)
        node = s.get('environment', s) if isinstance(s, dict) else {}
        if node.get(member) == 0: return s
        time.sleep(0.02)
    failures.append('settle ' + path); return s


# ---------- Records: the organization and everything in it, with the bodies public clients send.
orgs = call('GET', '/organization')
org = orgs['results'][0]['id']
call('GET', f'/organization/{org}')
call('PUT', f'/organization/{org}', {'name': 'Conformance', 'plan': 'TEAM', 'description': 'checked against the description',
     'website_url': 'https://acme.example', 'repository': None, 'logo_url': None, 'icon_url': None, 'admin_emails': ['ops@acme.example']})
roles = call('GET', f'/organization/{org}/availableRole')['results']
viewer = next(r['id'] for r in roles if r['name'] == 'VIEWER')
token = call('POST', f'/organization/{org}/apiToken', {'name': 'ci', 'description': 'pipelines', 'role_id': viewer})
call('GET', f'/organization/{org}/apiToken')
call('DELETE', f'/organization/{org}/apiToken/{token["id"]}')
# Organization webhooks: a local receiver hears the deployments below (the server allows
# private targets for this run).
received = []


class Receiver(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass

    def do_POST(self):
        raw = self.rfile.read(int(self.headers['Content-Length']))
        received.append((dict(self.headers), json.loads(raw)))
        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()


receiver = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Receiver)
threading.Thread(target=receiver.serve_forever, daemon=True).start()
hook_body = {'kind': 'STANDARD', 'target_url': f'http://127.0.0.1:{receiver.server_address[1]}/hook', 'target_secret': 'conformance-hook-secret',
             'description': 'deployments', 'enabled': True, 'events': ['DEPLOYMENT_STARTED', 'DEPLOYMENT_SUCCESSFUL', 'DEPLOYMENT_FAILURE', 'DEPLOYMENT_CANCELLED'],
             'project_names_filter': [], 'environment_types_filter': []}
hook = call('POST', f'/organization/{org}/webhook', hook_body)['id']
call('GET', f'/organization/{org}/webhook')
call('GET', f'/organization/{org}/webhook/{hook}')
call('PUT', f'/organization/{org}/webhook/{hook}', dict(hook_body, description='every deployment'))
spare_hook = call('POST', f'/organization/{org}/webhook', dict(hook_body, enabled=False))['id']
call('DELETE', f'/organization/{org}/webhook/{spare_hook}')
# A stand-in for the git provider's API, where the webhook of the application is kept.
hooks = []


class FakeHostA(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args): pass

    def answer(self, status, body):
        raw = json.dumps(body).encode()
        self.send_response(status); self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(raw))); self.end_headers(); self.wfile.write(raw)

    def do_GET(self): self.answer(200, hooks)

    def do_POST(self):
        sent = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        hooks.append(dict(sent, id=len(hooks) + 1)); self.answer(201, hooks[-1])

    def do_PATCH(self):
        sent = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        hooks[0].update(sent); self.answer(200, hooks[0])


provider = http.server.ThreadingHTTPServer(('127.0.0.1', 0), FakeHostA)
threading.Thread(target=provider.serve_forever, daemon=True).start()
git_api_url = f'http://127.0.0.1:{provider.server_address[1]}'
git_token = call('POST', f'/organization/{org}/gitToken', {'name': 'conformance-gh', 'description': 'bot', 'type': 'HOSTA', 'token': 'ghp_conformance', 'git_api_url': git_api_url, 'workspace': None})['id']
call('GET', f'/organization/{org}/gitToken')
call('GET', f'/organization/{org}/gitToken/{git_token}')
call('PUT', f'/organization/{org}/gitToken/{git_token}', {'name': 'conformance-gh', 'description': 'the bot', 'type': 'HOSTA', 'token': 'ghp_conformance2', 'git_api_url': git_api_url})
credentials = call('POST', f'/organization/{org}/cloudA/credentials', {'type': 'AWS_STATIC', 'name': 'keys', 'access_key_id': 'AKIACONFORMANCE', 'secret_access_key': 'conformance-secret'})['id']
call('GET', f'/organization/{org}/cloudA/credentials')
call('GET', f'/organization/{org}/cloudA/credentials/{credentials}')
call('PUT', f'/organization/{org}/cloudA/credentials/{credentials}', {'type': 'AWS_STATIC', 'name': 'keys', 'access_key_id': 'AKIACONFORMANCE2', 'secret_access_key': 'conformance-secret2'})
other_credentials = {
    'altcloud': {'name': 'scw', 'altcloud_access_key': 'SCWKEY', 'altcloud_secret_key': 'alt-secret', 'altcloud_project_id': 'p', 'altcloud_organization_id': 'o'},
    'cloudC': {'name': 'az', 'cloudC_subscription_id': 'sub', 'cloudC_tenant_id': 'tenant'},
    'onPremise': {'name': 'racks'},
}
for provider, body in other_credentials.items():
    cid = call('POST', f'/organization/{org}/{provider}/credentials', body)['id']
    call('GET', f'/organization/{org}/{provider}/credentials')
    call('GET', f'/organization/{org}/{provider}/credentials/{cid}')
    call('PUT', f'/organization/{org}/{provider}/credentials/{cid}', dict(body, name=body['name'] + '2'))
    call('DELETE', f'/organization/{org}/{provider}/credentials/{cid}')
role = call('POST', f'/organization/{org}/cloudA/credentials', {'type': 'CLOUDA_ROLE', 'name': 'role', 'role_arn': 'arn:aws:iam::1:role/x'})['id']
call('GET', f'/organization/{org}/credentials')
for provider in ('cloudA', 'altcloud', 'cloudC'):
    call('GET', f'/{provider}/region')
cluster_body = {'name': 'conf', 'description': 'where it runs', 'region': 'eu-west-3', 'cloud_provider': 'CLOUDA',
                'cloud_provider_credentials': {'cloud_provider': 'CLOUDA', 'credentials': {'id': credentials, 'name': 'keys'}, 'region': 'eu-west-3'},
                'min_running_nodes': 1, 'max_running_nodes': 3, 'disk_size': 50, 'instance_type': 't3a.large', 'kubernetes': 'MANAGED', 'production': False, 'features': []}
cluster = call('POST', f'/organization/{org}/cluster', cluster_body)
call('GET', f'/organization/{org}/cluster')
call('PUT', f'/organization/{org}/cluster/{cluster["id"]}', dict(cluster_body, description='where it all runs'))
cluster_path = f'/organization/{org}/cluster/{cluster["id"]}'
call('GET', f'/organization/{org}/cluster/status')
call('GET', f'{cluster_path}/isReady')
settings = call('GET', f'{cluster_path}/advancedSettings')
call('PUT', f'{cluster_path}/advancedSettings', dict(settings, **{'loki.log_retention_in_week': 4}))
call('POST', f'{cluster_path}/deploy')


def cluster_reaches(state):
    for _ in range(1500):
        if call('GET', f'{cluster_path}/status')['status'] == state: return
        time.sleep(0.02)
    failures.append(f'cluster never {state}')


cluster_reaches('DEPLOYED')
call('GET', f'{cluster_path}/logs')
call('GET', f'/cluster/{cluster["id"]}/logs?endpoint=logs&query=all')
call('POST', f'{cluster_path}/stop')
cluster_reaches('STOPPED')
registry_body = {'name': 'conf-hub', 'kind': 'DOCKER_HUB', 'description': 'images', 'url': 'https://docker.io', 'config': {'username': 'u', 'password': 'p'}}
registry = call('POST', f'/organization/{org}/containerRegistry', registry_body)['id']
call('GET', f'/organization/{org}/containerRegistry')
call('GET', f'/organization/{org}/containerRegistry/{registry}')
call('PUT', f'/organization/{org}/containerRegistry/{registry}', dict(registry_body, description='our images'))
charts_body = {'name': 'charts', 'kind': 'HTTPS', 'url': 'https://charts.example.com', 'skip_tls_verification': False, 'config': {'username': 'u', 'password': 'p'}}
charts = call('POST', f'/organization/{org}/helmRepository', charts_body)['id']
call('GET', f'/organization/{org}/helmRepository')
call('GET', f'/organization/{org}/helmRepository/{charts}')
call('PUT', f'/organization/{org}/helmRepository/{charts}', dict(charts_body, name='our-charts'))
call('GET', '/availableHelmRepository')
project = call('POST', f'/organization/{org}/project', {'name': 'deployments', 'description': 'everything deployed'})['id']
call('GET', f'/organization/{org}/project')
call('GET', f'/project/{project}')
call('PUT', f'/project/{project}', {'name': 'deployments', 'description': 'everything we deploy'})
env = call('POST', f'/project/{project}/environment', {'name': 'prod', 'cluster': cluster['id'], 'mode': 'PRODUCTION'})['id']
call('GET', f'/project/{project}/environment')
call('GET', f'/environment/{env}')
call('PUT', f'/environment/{env}', {'name': 'prod', 'mode': 'PRODUCTION'})

probe = lambda kind, **kw: {'type': {kind: kw}, 'initial_delay_seconds': 15, 'period_seconds': 10, 'timeout_seconds': 5,
                            'success_threshold': 1, 'failure_threshold': 3}
healthchecks = {'readiness_probe': probe('tcp', port=8080, host=None), 'liveness_probe': probe('http', port=8080, path='/healthz', scheme='HTTP')}
git = {'url': 'https://github.com/acme/api.git', 'branch': 'main', 'root_path': '/', 'git_token_id': git_token}
ports = [{'name': 'p8080', 'internal_port': 8080, 'external_port': 443, 'publicly_accessible': True, 'is_default': True, 'protocol': 'HTTP'}]
runtime = {'cpu': 500, 'memory': 512, 'gpu': 0, 'ephemeral_storage_in_gib': 2, 'min_running_instances': 1, 'max_running_instances': 2,
           'healthchecks': healthchecks, 'auto_preview': False, 'ports': ports, 'arguments': ['serve'], 'entrypoint': '/app',
           'auto_deploy': False, 'annotations_groups': [], 'labels_groups': [], 'cpu_architecture': 'AMD64',
           'storage': [{'type': 'FAST_SSD', 'size': 10, 'mount_point': '/data'}]}
bodies = {
    'application': dict(runtime, name='api', description='the API', git_repository=git, build_mode='DOCKER', dockerfile_path='Dockerfile',
                        icon_uri='app://capstan/application', docker_target_build_stage=None),
    'container': dict(runtime, name='web', description='the site', registry_id=registry, image_name='nginx', tag='1', icon_uri='app://capstan/container'),
    'database': {'name': 'db', 'description': 'the data', 'type': 'POSTGRESQL', 'version': '16', 'mode': 'CONTAINER', 'accessibility': 'PRIVATE',
                 'cpu': 250, 'memory': 256, 'storage': 10, 'annotations_groups': [], 'labels_groups': [], 'icon_uri': 'app://capstan/database'},
    'job': {'name': 'cron', 'description': 'hourly', 'cpu': 500, 'memory': 512, 'gpu': 0, 'max_nb_restart': 0, 'max_duration_seconds': 300,
            'auto_preview': False, 'port': None, 'source': {'image': {'image_name': 'busybox', 'tag': '1', 'registry_id': registry}},
            'healthchecks': {}, 'schedule': {'cronjob': {'scheduled_at': '0 * * * *', 'timezone': 'Etc/UTC', 'arguments': ['run'], 'entrypoint': '/bin/sh'}},
            'auto_deploy': False, 'annotations_groups': [], 'labels_groups': [], 'icon_uri': 'app://capstan/job', 'cpu_architecture': 'AMD64'},
    'helm': {'name': 'redis', 'description': 'cache', 'timeout_sec': 600, 'auto_preview': False, 'auto_deploy': False,
             'source': {'helm_repository': {'repository': charts, 'chart_name': 'redis', 'chart_version': '19.0.0'}},
             'arguments': ['--wait'], 'allow_cluster_wide_resources': False, 'values_override': {'set': [['replicas', '1']], 'set_string': [], 'set_json': [], 'file': None},
             'icon_uri': 'app://capstan/helm', 'ports': [{'name': 'redis', 'internal_port': 6379, 'external_port': 443, 'service_name': 'redis-master', 'protocol': 'HTTP', 'is_default': True}]},
    'terraform': {'name': 'infra', 'description': 'the network', 'auto_deploy_config': {'auto_deploy': False, 'terraform_action': 'DEFAULT'},
                  'terraform_files_source': {'git_repository': {'url': 'https://gitlab.com/acme/infra', 'branch': 'main', 'root_path': '/', 'git_token_id': None}},
                  'terraform_variables_source': {'tf_var_file_paths': ['/prod.tfvars'], 'tf_vars': [{'key': 'region', 'value': 'eu-west-3', 'secret': False}]},
                  'backend': {'kubernetes': {}}, 'engine': 'TERRAFORM', 'provider_version': {'read_from_terraform_block': False, 'explicit_version': '1.9.0'},
                  'timeout_sec': 1800, 'icon_uri': 'app://capstan/terraform', 'job_resources': {'cpu_milli': 1000, 'ram_mib': 1024, 'gpu': 0, 'storage_gib': 2},
                  'use_cluster_credentials': False, 'action_extra_arguments': {'plan': ['-lock=false']}},
}
echoed = {'icon_uri', 'healthchecks', 'auto_preview', 'gpu', 'ephemeral_storage_in_gib', 'cpu_architecture', 'arguments', 'entrypoint',
          'timeout_sec', 'job_resources', 'provider_version', 'backend', 'action_extra_arguments', 'use_cluster_credentials',
          'auto_deploy_config', 'allow_cluster_wide_resources', 'max_nb_restart', 'max_duration_seconds', 'description', 'engine'}


def echoes(sent, got, what):
    """A member sent is answered as stored (the server may add defaults inside it)."""
    for key in echoed & sent.keys():
        if got.get(key) != sent[key] and not (isinstance(sent[key], dict) and sent[key].items() <= (got.get(key) or {}).items()):
            print(f'FAIL {what}: {key} sent {sent[key]!r}, answered {got.get(key)!r}'); failures.append(f'{what} {key}')


ids = {}
for kind, body in bodies.items():
    created = call('POST', f'/environment/{env}/{kind}', body)
    ids[kind] = created['id']
    echoes(body, created, f'POST {kind}')
    echoes(body, call('GET', f'/{kind}/{ids[kind]}'), f'GET {kind}')
    call('GET', f'/environment/{env}/{kind}')
    call('GET', f'/environment/{env}/{kind}/status')
edits = {kind: dict(body, description='edited', icon_uri=f'app://capstan/edited-{kind}') for kind, body in bodies.items()}
# The public edit body of a database has no type nor mode.
edits['database'] = {k: v for k, v in edits['database'].items() if k not in ('type', 'mode')}
for kind, body in edits.items():
    echoes(body, call('PUT', f'/{kind}/{ids[kind]}', body), f'PUT {kind}')

# Advanced settings of every kind that has them: the defaults, the service's own, an edit.
for kind in ('application', 'container', 'job', 'helm', 'terraform'):
    call('GET', f'/default{kind.capitalize()}AdvancedSettings')
    own = call('GET', f'/{kind}/{ids[kind]}/advancedSettings')
    call('PUT', f'/{kind}/{ids[kind]}/advancedSettings', {'deployment.termination_grace_period_seconds': 90} if 'deployment.termination_grace_period_seconds' in own else {'network.ingress.enable_cors': True})
# Sticky sessions (the router's network settings).
for kind in ('application', 'container'):
    call('GET', f'/{kind}/{ids[kind]}/network')
    call('PUT', f'/{kind}/{ids[kind]}/network', {'sticky_session': True})

# Deployment restrictions of the kinds a push deploys.
for kind in ('application', 'job', 'helm', 'terraform'):
    path = f'/{kind}/{ids[kind]}/deploymentRestriction'
    restriction = call('POST', path, {'mode': 'MATCH', 'type': 'PATH', 'value': 'src/'})['id']
    call('PUT', f'{path}/{restriction}', {'mode': 'EXCLUDE', 'type': 'PATH', 'value': 'docs/'})
    call('GET', path)
    doomed = call('POST', path, {'mode': 'MATCH', 'type': 'PATH', 'value': 'tmp/'})['id']
    call('DELETE', f'{path}/{doomed}')

# Custom domains (under localhost: resolved without a network).
for kind in ('application', 'container', 'helm'):
    path = f'/{kind}/{ids[kind]}/customDomain'
    domain = call('POST', path, {'domain': f'{kind}.conformance.localhost', 'generate_certificate': True, 'use_cdn': False})['id']
    call('PUT', f'{path}/{domain}', {'domain': f'www.{kind}.conformance.localhost', 'generate_certificate': False, 'use_cdn': False})
    call('GET', path)
    call('GET', f'{path}/{domain}')
    call('GET', f'{path}/{domain}/status')
    call('GET', f'/{kind}/{ids[kind]}/checkCustomDomain')
    doomed = call('POST', path, {'domain': f'old.{kind}.conformance.localhost', 'generate_certificate': True})['id']
    call('DELETE', f'{path}/{doomed}')

# Labels and annotations groups, attached to a service of each kind that carries them.
labels_group = call('POST', f'/organization/{org}/labelsGroups', {'name': 'team', 'labels': [{'key': 'team', 'value': 'core', 'propagate_to_cloud_provider': True}]})['id']
annotations_group = call('POST', f'/organization/{org}/annotationsGroups', {'name': 'owner', 'annotations': [{'key': 'example.com/owner', 'value': 'Jane'}], 'scopes': ['PODS']})['id']
for kind in ('application', 'container', 'job', 'database'):
    call('PUT', f'/{kind}/{ids[kind]}', dict(edits[kind], labels_groups=[{'id': labels_group}], annotations_groups=[{'id': annotations_group}]))
labelled = call('PUT', cluster_path, dict(cluster_body, labels_groups=[{'id': labels_group}]))
if (labelled or {}).get('labels_groups') != [{'id': labels_group}]:
    print(f'FAIL PUT cluster: labels_groups answered {(labelled or {}).get("labels_groups")!r}'); failures.append('PUT cluster labels_groups')
for segment, group, body in (('labelsGroups', labels_group, {'name': 'team', 'labels': [{'key': 'team', 'value': 'edge', 'propagate_to_cloud_provider': False}]}),
                             ('annotationsGroups', annotations_group, {'name': 'owner', 'annotations': [{'key': 'example.com/owner', 'value': 'Joe'}], 'scopes': ['PODS', 'SERVICES']})):
    call('GET', f'/organization/{org}/{segment}')
    call('GET', f'/organization/{org}/{segment}/{group}')
    call('PUT', f'/organization/{org}/{segment}/{group}', body)
    call('GET', f'/organization/{org}/{segment}/{group}/associatedItems')
    spare = call('POST', f'/organization/{org}/{segment}', dict(body, name='spare'))['id']
    call('DELETE', f'/organization/{org}/{segment}/{spare}')

# Service clone, every kind, into the same environment.
for kind in bodies:
    call('POST', f'/{kind}/{ids[kind]}/clone', {'name': f'{kind}-clone', 'environment_id': env})

# Deployment rules: the project's (in priority order, taken by a new environment whose name
# matches) and the environment's own.
rule_body = {'name': 'features', 'description': 'office hours', 'mode': 'DEVELOPMENT', 'cluster_id': cluster['id'],
             'auto_stop': True, 'timezone': 'Europe/Paris', 'start_time': '1970-01-01T08:00:00.000Z',
             'stop_time': '1970-01-01T19:00:00.000Z', 'weekdays': ['MONDAY', 'FRIDAY'], 'wildcard': 'feat-*'}
rules_path = f'/project/{project}/deploymentRule'
rule = call('POST', rules_path, rule_body)['id']
spare_rule = call('POST', rules_path, dict(rule_body, name='all', wildcard=''))['id']
call('PUT', f'{rules_path}/order', {'project_deployment_rule_ids_in_order': [spare_rule, rule]})
call('PUT', f'{rules_path}/{rule}', dict(rule_body, auto_stop=False))
call('GET', rules_path)
call('GET', f'{rules_path}/{rule}')
call('DELETE', f'{rules_path}/{spare_rule}')
ruled = call('POST', f'/project/{project}/environment', {'name': 'feat-rules'})['id']
env_rule = call('GET', f'/environment/{ruled}/deploymentRule')
call('PUT', f'/environment/{ruled}/deploymentRule/{env_rule["id"]}', {'on_demand_preview': False, 'auto_preview': False, 'auto_stop': True,
     'timezone': 'UTC', 'start_time': '1970-01-01T07:00:00Z', 'stop_time': '1970-01-01T20:00:00Z', 'weekdays': ['SATURDAY']})
call('DELETE', f'/environment/{ruled}')

# Variables and secrets at every scope, and the generic /variable routes.
scopes = {'project': project, 'environment': env, 'application': ids['application'], 'container': ids['container'], 'job': ids['job']}
above = {}
for scope, parent in scopes.items():
    var = call('POST', f'/{scope}/{parent}/environmentVariable', {'key': f'{scope.upper()}_URL', 'value': 'https://acme.example', 'mount_path': None, 'enable_interpolation_in_file': None})['id']
    call('GET', f'/{scope}/{parent}/environmentVariable')
    secret = call('POST', f'/{scope}/{parent}/secret', {'key': f'{scope.upper()}_TOKEN', 'value': 'hunter2', 'mount_path': None, 'enable_interpolation_in_file': None})['id']
    call('GET', f'/{scope}/{parent}/secret')
    # The same variables through the routes of their parent.
    call('PUT', f'/{scope}/{parent}/environmentVariable/{var}', {'key': f'{scope.upper()}_URL', 'value': 'https://acme.example/v2', 'mount_path': None, 'enable_interpolation_in_file': None})
    call('PUT', f'/{scope}/{parent}/secret/{secret}', {'key': f'{scope.upper()}_TOKEN', 'value': 'hunter3', 'enable_interpolation_in_file': None})
    if scope == 'project':
        above = {'environmentVariable': var, 'secret': secret}
    for segment, target in above.items():
        alias = call('POST', f'/{scope}/{parent}/{segment}/{target}/alias', {'key': f'{scope.upper()}_{segment.upper()}_ALIAS', 'enable_interpolation_in_file': None})['id']
        call('DELETE', f'/{scope}/{parent}/{segment}/{alias}')
        if scope == 'project':
            # Nothing is above a project: its own variables cannot be overridden there.
            call('POST', f'/{scope}/{parent}/{segment}/{target}/override', {'value': 'x'}, expect=400)
        else:
            override = call('POST', f'/{scope}/{parent}/{segment}/{target}/override', {'value': f'{scope}-value', 'enable_interpolation_in_file': None})['id']
            call('DELETE', f'/{scope}/{parent}/{segment}/{override}')
    spare = call('POST', f'/{scope}/{parent}/secret', {'key': 'SPARE', 'value': 's'})['id']
    call('DELETE', f'/{scope}/{parent}/secret/{spare}')
    spare = call('POST', f'/{scope}/{parent}/environmentVariable', {'key': 'SPARE', 'value': 's'})['id']
    call('DELETE', f'/{scope}/{parent}/environmentVariable/{spare}')
imports = [{'name': 'IMPORTED_LEVEL', 'value': 'info', 'scope': 'ENVIRONMENT', 'is_secret': False},
           {'name': 'IMPORTED_KEY', 'value': 'k3y', 'scope': 'PROJECT', 'is_secret': True}]
for kind in ('application', 'container', 'job'):
    own = {'name': f'IMPORTED_{kind.upper()}', 'value': 'v', 'scope': kind.upper(), 'is_secret': False}
    call('POST', f'/{kind}/{ids[kind]}/environmentVariable/import', {'overwrite': True, 'vars': imports + [own]})
call('POST', f'/variable/import?service_id={ids["helm"]}&service_type=HELM', {'overwrite': True, 'vars': imports})
variable = call('POST', '/variable', {'key': 'LOG_LEVEL', 'value': 'info', 'mount_path': None, 'is_secret': False,
                                       'variable_scope': 'ENVIRONMENT', 'variable_parent_id': env, 'description': 'verbosity', 'enable_interpolation_in_file': None})['id']
call('GET', f'/variable?parent_id={env}&scope=ENVIRONMENT')
call('GET', f'/variable?parent_id={ids["application"]}&scope=APPLICATION&is_secret=true')
call('PUT', f'/variable/{variable}', {'key': 'LOG_LEVEL', 'value': 'debug', 'description': 'more'})
call('POST', f'/variable/{variable}/alias', {'key': 'LEVEL', 'alias_scope': 'APPLICATION', 'alias_parent_id': ids['application']})
override = call('POST', f'/variable/{variable}/override', {'value': 'warn', 'override_scope': 'CONTAINER', 'override_parent_id': ids['container']})['id']
call('DELETE', f'/variable/{override}')

call('GET', f'/organization/{org}/environments')
call('GET', f'/organization/{org}/services')
call('GET', f'/organization/{org}/services?project_id={project}&environment_id={env}&cluster_id={cluster["id"]}')
call('GET', f'/environment/{env}/services')
call('GET', f'/cluster/{cluster["id"]}/environments')
call('GET', f'/organization/{org}/containerRegistry/{registry}/associatedServices')
call('GET', f'/organization/{org}/containerRegistry/{registry}/container/status')
call('GET', f'/organization/{org}/helmRepository/{charts}/associatedServices')
call('GET', '/cloudProvider')
call('GET', '/availableContainerRegistry')
call('GET', f'/service/{ids["application"]}/gitWebhookStatus')
call('POST', f'/service/{ids["application"]}/gitWebhook/sync')
call('GET', f'/organization/{org}/gitToken/{git_token}/associatedServices')
clone = call('POST', f'/environment/{env}/clone', {'name': 'prod-copy', 'mode': 'STAGING', 'cluster_id': cluster['id'], 'project_id': project, 'apply_deployment_rule': False})['id']
for kind, body in edits.items():
    copy = next(s for s in call('GET', f'/environment/{clone}/{kind}')['results'] if s['name'] == body['name'])
    echoes(body, copy, f'clone {kind}')

# Stages.
stages = call('GET', f'/environment/{env}/deploymentStage')
default = stages['results'][0]['id']
first = call('POST', f'/environment/{env}/deploymentStage', {'name': 'data', 'description': 'databases first'})['id']
call('PUT', f'/deploymentStage/{first}', {'name': 'data', 'description': 'databases and jobs'})
call('GET', f'/deploymentStage/{first}')
call('PUT', f'/deploymentStage/{first}/moveBefore/{default}')
call('PUT', f'/deploymentStage/{first}/moveAfter/{default}')
call('PUT', f'/deploymentStage/{first}/moveBefore/{default}')
call('PUT', f'/deploymentStage/{first}/service/{ids["database"]}', {'is_skipped': False})
call('PUT', f'/deploymentStage/{first}/service/{ids["job"]}')
call('GET', f'/service/{ids["database"]}/deploymentStage')
spare = call('POST', f'/environment/{env}/deploymentStage', {'name': 'spare'})['id']
call('DELETE', f'/deploymentStage/{spare}')
call('DELETE', f'/deploymentStage/{first}', expect=409)

# Statuses before anything ran, then an environment deployment stage by stage.
call('GET', f'/environment/{env}/status')
call('GET', f'/environment/{env}/statuses')
call('GET', f'/project/{project}/environment/status')
deployed = call('POST', f'/environment/{env}/deploy', agent='conformance-cli/1.0')
call('GET', f'/environment/{env}/deploymentQueue')
for kind in ids:
    call('GET', f'/service/{ids[kind]}/deploymentQueue')
call('GET', f'/environment/deploymentStatus?deploymentRequestId={deployed["deployment_request_id"]}')
settle(f'/environment/{env}/statuses')

# Every kind's own actions, statuses and histories.
for kind, sid in ids.items():
    body = {'git_commit_id': 'a1b2c3d'} if kind == 'application' else {}
    call('POST', f'/{kind}/{sid}/deploy', body)
    settle(f'/{kind}/{sid}/status')
    call('POST', f'/{kind}/{sid}/redeploy')
    settle(f'/{kind}/{sid}/status')
    if kind in ('application', 'container', 'database'):
        call('POST', f'/{kind}/{sid}/restart-service')
        settle(f'/{kind}/{sid}/status')
    if kind != 'terraform':
        call('POST', f'/{kind}/{sid}/stop')
        settle(f'/{kind}/{sid}/status')
    call('GET', f'/{kind}/{sid}/status')
    call('GET', f'/environment/{env}/{kind}/status')
    if kind != 'terraform':
        call('GET', f'/{kind}/{sid}/deploymentHistory')
    call('GET', f'/{kind}/{sid}/deploymentHistoryV2?pageSize=5')
    call('POST', f'/{kind}/{sid}/uninstall', {})
    settle(f'/{kind}/{sid}/status')

# Environment actions and bulk actions.
call('POST', f'/environment/{env}/redeploy')
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/service/deploy', {
    'applications': [{'application_id': ids['application'], 'git_commit_id': 'b2c3d4e'}],
    'containers': [{'id': ids['container'], 'image_tag': '2'}], 'databases': [ids['database']],
    'helms': [{'id': ids['helm'], 'chart_version': '19.0.1'}], 'jobs': [{'id': ids['job'], 'image_tag': '2'}],
    'terraforms': [{'id': ids['terraform']}]})
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/service/restart-service', {'application_ids': [ids['application']], 'container_ids': [ids['container']], 'database_ids': [ids['database']]})
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/service/stop', {'container_ids': [ids['container']], 'job_ids': [ids['job']]})
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/service/uninstall', {'helm_ids': [ids['helm']]})
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/stop')
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/deploy')
call('POST', f'/environment/{env}/cancelDeployment', {'force_cancel': False})
settle(f'/environment/{env}/statuses')
queued = call('POST', f'/application/{ids["application"]}/deploy', {'git_commit_id': 'c3d4e5f'})
later = call('POST', f'/container/{ids["container"]}/deploy', {'image_tag': ''})
call('POST', f'/deploymentQueue/{later["deployment_request_id"]}/cancelDeployment', {})
settle(f'/environment/{env}/statuses')
call('GET', f'/environment/{env}/deploymentHistoryV2')
# What the deployments above wrote, in both shapes; every kind's steps left lines.
env_logs = call('GET', f'/environment/{env}/logs')
if not isinstance(env_logs, list) or not env_logs:
    print('FAIL the environment\'s deployment log is empty'); failures.append('environment logs')
call('GET', f'/environment/{env}/logs?version=2')
call('GET', f'/environment/{env}/log')
# Links: empty on the simulated engine (nothing runs), in the public Link shape all the same.
for kind in ('application', 'container', 'helm'):
    call('GET', f'/{kind}/{ids[kind]}/link')
call('GET', f'/environment/{env}/link')
call('GET', f'/environment/{env}/statusesWithStages')
# Service output: empty on the simulated engine (nothing prints), in the public shape.
for kind in ('application', 'container', 'job'):
    call('GET', f'/{kind}/{ids[kind]}/log')
for kind in ('application', 'container', 'helm'):
    ingress = call('GET', f'/{kind.upper()}/{ids[kind]}/ingressDeploymentStatus')
    if not ingress or ingress.get('routerId') != env:
        print(f'FAIL the {kind}\'s ingress names its environment\'s router: {ingress}'); failures.append('ingress')
# Failed job executions: the simulated engine keeps none.
cleaned = call('POST', f'/environment/{env}/cleanFailedJobs', {'job_ids': [ids['job']]})
if cleaned != {'clean_job_ids': [], 'clean_kubernetes_jobs': []}:
    print(f'FAIL nothing to clean on the simulated engine: {cleaned}'); failures.append('cleanFailedJobs')
call('POST', f'/environment/{env}/cleanFailedJobs')
call('POST', f'/job/{ids["job"]}/cleanFailedJob')
# The deployments above reached the receiver, signed, and the delivery log and the audit log
# tell of them.
for _ in range(400):
    if any(b.get('type') == 'DEPLOYMENT_SUCCESSFUL' for _, b in received): break
    time.sleep(0.05)
else:
    print('FAIL no DEPLOYMENT_SUCCESSFUL delivery reached the receiver'); failures.append('webhook delivery')
if received and not all({'webhook-id', 'webhook-timestamp', 'webhook-signature'} <= {k.lower() for k in h} for h, _ in received):
    print('FAIL a delivery lacks its Standard Webhooks headers'); failures.append('webhook headers')
if not call('GET', f'/organization/{org}/webhook/{hook}/event').get('results'):
    print('FAIL the delivery log is empty'); failures.append('webhook log')
audit_log = call('GET', f'/organization/{org}/events?pageSize=100')
if not any(e.get('event_type') == 'DEPLOYED' for e in audit_log.get('events', [])):
    print('FAIL no DEPLOYED event in the audit log'); failures.append('audit log')
call('GET', f'/organization/{org}/events?pageSize=5&targetType=PROJECT&eventType=CREATE')
call('GET', f'/organization/{org}/targets?targetType=PROJECT')
call('GET', f'/organization/{org}/targets?targetType=CONTAINER&targetLevelToFetch=ENVIRONMENT')
call('GET', f'/environment/{env}/deploymentHistory')
call('POST', f'/environment/{env}/uninstall')
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/service/delete', {'terraform_ids': [ids['terraform']]})
call('GET', f'/environment/{env}/statuses')
doomed = call('POST', f'/project/{project}/environment', {'name': 'doomed'})['id']
call('DELETE', f'/environment/{doomed}')

# Organization-wide deployments of a new image tag.
images = call('POST', f'/project/{project}/environment', {'name': 'images'})['id']
auto = call('POST', f'/environment/{images}/container', dict(bodies['container'], name='auto-web', auto_deploy=True))['id']
auto_job = call('POST', f'/environment/{images}/job', dict(bodies['job'], name='auto-cron', auto_deploy=True))['id']
call('POST', f'/organization/{org}/container/deploy', {'image_name': 'nginx', 'tag': '3'})
call('POST', f'/organization/{org}/job/deploy', {'image_name': 'busybox', 'tag': '3'})
settle(f'/environment/{images}/statuses')
call('POST', f'/environment/{images}/container', dict(bodies['container'], name='previewed', image_name='previewed', auto_preview=True))
call('POST', f'/organization/{org}/container/preview', {'image_name': 'previewed', 'tag': '2'})

# Database-application links: an application and a database of one environment are linked.
linked_db = call('POST', f'/environment/{images}/database', dict(bodies['database'], name='linked-db'))['id']
linked_app = call('POST', f'/environment/{images}/application', dict(bodies['application'], name='linked-app'))['id']
call('GET', f'/database/{linked_db}/application')
call('DELETE', f'/database/{linked_db}/application/{linked_app}')

# Databases: credentials, versions, the configurations an environment offers.
call('GET', f'/database/{linked_db}/masterCredentials')
call('GET', f'/database/{linked_db}/version')
call('GET', f'/environment/{env}/databaseConfiguration')
call('GET', '/terraform/availableVersion')
call('POST', f'/database/{linked_db}/deploy')
settle(f'/environment/{images}/statuses')
backup = call('POST', f'/database/{linked_db}/backup', {'name': 'nightly', 'message': 'before the migration'})['id']
call('GET', f'/database/{linked_db}/backup')
call('DELETE', f'/database/{linked_db}/backup/{backup}')


# ---------- Sources: a repository served on 127.0.0.1 by `git http-backend` (git's own CGI).
class GitBackend(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass

    def serve(self):
        import subprocess
        body = self.rfile.read(int(self.headers.get('Content-Length') or 0))
        path, _, query = self.path.partition('?')
        env = {'PATH': os.environ['PATH'], 'GIT_PROJECT_ROOT': sources_root, 'GIT_HTTP_EXPORT_ALL': '1',
               'REQUEST_METHOD': self.command, 'PATH_INFO': path, 'QUERY_STRING': query,
               'CONTENT_TYPE': self.headers.get('Content-Type', ''), 'CONTENT_LENGTH': str(len(body)),
               'HTTP_CONTENT_ENCODING': self.headers.get('Content-Encoding', ''),
               'GIT_PROTOCOL': self.headers.get('Git-Protocol', ''), 'REMOTE_ADDR': '127.0.0.1'}
        out = subprocess.run(['git', 'http-backend'], input=body, env=env, capture_output=True).stdout
        head, _, content = out.partition(b'\r\n\r\n')
        status, headers = 200, []
        for line in head.decode().splitlines():
            k, _, v = line.partition(':')
            if k.lower() == 'status': status = int(v.split()[0])
            elif k: headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers: self.send_header(k, v)
        self.send_header('Content-Length', str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    do_GET = do_POST = serve


import subprocess, tempfile
sources_root = tempfile.mkdtemp()
work_tree = os.path.join(sources_root, 'work')
git_env = dict(os.environ, GIT_AUTHOR_NAME='Ada', GIT_AUTHOR_EMAIL='ada@example.com', GIT_COMMITTER_NAME='Ada',
               GIT_COMMITTER_EMAIL='ada@example.com', GIT_CONFIG_GLOBAL='/dev/null', GIT_CONFIG_NOSYSTEM='1')
os.makedirs(os.path.join(work_tree, 'infra'))
open(os.path.join(work_tree, 'Dockerfile'), 'w').write('ARG VERSION\nFROM busybox:1\n')
open(os.path.join(work_tree, 'infra', 'main.tf'), 'w').write('output "x" { value = 1 }\n')
for args in (['init', '-q', '-b', 'main'], ['add', '-A'], ['commit', '-q', '-m', 'first'],
             ['clone', '-q', '--bare', '.', os.path.join(sources_root, 'acme', 'repo.git')]):
    subprocess.run(['git', *args], cwd=work_tree, env=git_env, check=True)
sources = http.server.ThreadingHTTPServer(('127.0.0.1', 0), GitBackend)
threading.Thread(target=sources.serve_forever, daemon=True).start()
local_git = {'url': f'http://127.0.0.1:{sources.server_address[1]}/acme/repo.git', 'branch': 'main', 'root_path': '/',
             'git_token_id': None, 'provider': 'HOSTA', 'owner': 'acme', 'name': 'repo'}
call('POST', f'/environment/{env}/checkDockerfile', {'git_repository': local_git, 'dockerfile_path': 'Dockerfile'})
call('POST', f'/environment/{env}/checkGitFile', {'git_repository': local_git, 'files': ['infra/main.tf']})
call('POST', f'/organization/{org}/listDirectoriesFromGitRepository', local_git)
call('POST', f'/environment/{env}/checkContainerImage', {'registry_id': registry, 'image_name': 'nginx', 'tag': '1'})
sourced = call('POST', f'/project/{project}/environment', {'name': 'sources'})['id']
built = {
    'application': dict(bodies['application'], git_repository=local_git),
    'job': dict(bodies['job'], source={'docker': {'git_repository': local_git, 'dockerfile_path': 'Dockerfile'}}),
    'helm': dict(bodies['helm'], source={'git_repository': dict(local_git, root_path='/infra')}),
    'terraform': dict(bodies['terraform'], terraform_files_source={'git_repository': dict(local_git, root_path='/infra')}),
}
for kind, body in built.items():
    sid = call('POST', f'/environment/{sourced}/{kind}', body)['id']
    call('GET', f'/{kind}/{sid}/commit')
    if kind == 'application':
        call('GET', f'/application/{sid}/contributor')
    if kind == 'terraform':
        call('GET', f'/terraform/{sid}/terraformResources')

# ---------- Deletions, on records of their own so that the run above keeps its hierarchy.
spare_project = call('POST', f'/organization/{org}/project', {'name': 'spare'})['id']
spare_env = call('POST', f'/project/{spare_project}/environment', {'name': 'spare'})['id']
for kind, body in bodies.items():
    sid = call('POST', f'/environment/{spare_env}/{kind}', body)['id']
    call('DELETE', f'/{kind}/{sid}')
call('DELETE', f'/environment/{clone}')
call('DELETE', f'/project/{spare_project}')
spare_token = call('POST', f'/organization/{org}/gitToken', {'name': 'spare', 'type': 'HOSTB', 'token': 'glpat-spare'})['id']
call('DELETE', f'/organization/{org}/gitToken/{spare_token}')
spare_credentials = call('POST', f'/organization/{org}/cloudA/credentials', {'type': 'AWS_STATIC', 'name': 'spare', 'access_key_id': 'AKIASPARE', 'secret_access_key': 's'})['id']
call('DELETE', f'/organization/{org}/cloudA/credentials/{spare_credentials}')
spare_registry = call('POST', f'/organization/{org}/containerRegistry', dict(registry_body, name='spare'))['id']
call('DELETE', f'/organization/{org}/containerRegistry/{spare_registry}')
spare_charts = call('POST', f'/organization/{org}/helmRepository', dict(charts_body, name='spare'))['id']
call('DELETE', f'/organization/{org}/helmRepository/{spare_charts}')
spare_cluster = call('POST', f'/organization/{org}/cluster', dict(cluster_body, name='spare'))['id']
call('DELETE', f'/organization/{org}/cluster/{spare_cluster}')
if JWT_SECRET:
    # Organizations are created by signed-in users (a Bearer JWT), not by API tokens.
    user = jwt(JWT_SECRET, 'conformance-user')
    created = call('POST', '/organization', {'name': 'Second', 'plan': 'FREE', 'description': 'made by a user'}, bearer=user)['id']
    # Members, invitations and ownership, between users.
    call('GET', f'/organization/{created}/member', bearer=user)
    invited = call('POST', f'/organization/{created}/inviteMember', {'email': 'bob@example.com', 'role': 'DEVELOPER'}, bearer=user)['id']
    call('GET', f'/organization/{created}/inviteMember', bearer=user)
    call('GET', f'/organization/{created}/inviteMember/{invited}', bearer=user)
    bob = jwt(JWT_SECRET, 'conformance-bob')
    call('POST', f'/organization/{created}/inviteMember/{invited}', bearer=bob)
    admin_role = next(r['id'] for r in call('GET', f'/organization/{created}/availableRole', bearer=user)['results'] if r['name'] == 'ADMIN')
    call('PUT', f'/organization/{created}/member', {'user_id': 'conformance-bob', 'role_id': admin_role}, bearer=user)
    withdrawn = call('POST', f'/organization/{created}/inviteMember', {'email': 'eve@example.com'}, bearer=user)['id']
    call('DELETE', f'/organization/{created}/inviteMember/{withdrawn}', bearer=user)
    call('POST', f'/organization/{created}/transferOwnership', {'user_id': 'conformance-bob'}, bearer=user)
    call('DELETE', f'/organization/{created}/member', {'user_id': 'conformance-user'}, bearer=bob)
    call('DELETE', f'/organization/{created}', bearer=bob)

# ---------- Every operation Capstan serves that the description describes was called above.
served = json.load(urllib.request.urlopen(BASE + '/openapi.json'))['paths']
def key(method, template): return (method.upper(), re.sub(r'\{[^}]+\}', '{}', template))
described = {key(m, t): f'{m} {t}' for (m, t) in operations}
missed = sorted(described[key(m, t)] for t, item in served.items() for m in item
                if key(m, t) in described and f'{described[key(m, t)]}' not in checked)
if not JWT_SECRET:
    # Operations only a signed-in user (a Bearer JWT) performs.
    missed = [m for m in missed if not re.match(r'^(POST /organization|DELETE /organization/\{organizationId\}|\w+ /organization/\{organizationId\}/(member|inviteMember|transferOwnership).*)$', m)]
for m in missed:
    print(f'FAIL {m}: served but never called'); failures.append(m)
print(f'public conformance: {len(checked)} operations answered, {len(failures)} failing')
sys.exit(1 if failures else 0)
