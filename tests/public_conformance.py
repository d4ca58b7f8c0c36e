"""Calls Capstan's deployment operations (issue 12: statuses, environment actions, bulk actions,
stages, the queue, histories, every kind's actions) on a rich hierarchy and validates each answer
against the public API's own description (../shared/reference/public-api.yaml): the schema of
the operation's answer, found by its method and path template, with its required members,
nullability and enums. What real clients decode, checked the way they decode it.

    python3 tests/public_conformance.py BASE_URL TOKEN PUBLIC_API_YAML

Reading the description: `nullable` becomes a JSON-schema null type; `oneOf` is read as `anyOf`,
because the description's variants overlap (the helm variant of DeploymentHistoryServiceDetails
requires nothing, so every object matches it and no answer could match exactly one).
"""
import json, re, sys, time, urllib.request, uuid
import yaml
from jsonschema import Draft7Validator

BASE, TOKEN, REFERENCE = sys.argv[1], sys.argv[2], sys.argv[3]
ref = yaml.safe_load(open(REFERENCE))


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


def call(method, path, body=None, expect=None, agent=None, validate=True):
    """Calls an operation, checks its status is a success (or `expect`), validates the answer
    against the description's schema for that status (unless `validate` is false: the records
    this run only needs as a setting, whose members are another issue's), and returns the
    parsed body."""
    headers = {'Authorization': 'Token ' + TOKEN, 'Content-Type': 'application/json'}
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
    if not validate:
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
    for _ in range(1500):
        s = call('GET', path)
        node = s.get('environment', s) if isinstance(s, dict) else {}
        if node.get(member) == 0: return s
        time.sleep(0.02)
    failures.append('settle ' + path); return s


def setting(method, path, body=None):
    return call(method, path, body, validate=False)


org = setting('GET', '/organization')['results'][0]['id']
cluster = setting('POST', f'/organization/{org}/cluster', {'name': 'conf', 'region': 'eu-west-3', 'cloud_provider': 'CLOUDA'})
project = setting('POST', f'/organization/{org}/project', {'name': 'deployments'})['id']
env = setting('POST', f'/project/{project}/environment', {'name': 'prod', 'cluster': cluster['id']})['id']
registry = setting('POST', f'/organization/{org}/containerRegistry', {'name': 'conf-hub', 'kind': 'DOCKER_HUB', 'config': {'username': 'u', 'password': 'p'}})['id']
git = {'url': 'https://github.com/acme/api.git', 'branch': 'main'}
bodies = {
    'application': {'name': 'api', 'git_repository': git, 'ports': [{'internal_port': 8080}]},
    'container': {'name': 'web', 'registry_id': registry, 'image_name': 'nginx', 'tag': '1'},
    'database': {'name': 'db', 'type': 'POSTGRESQL', 'version': '16', 'mode': 'CONTAINER'},
    'job': {'name': 'cron', 'schedule': {'cronjob': {'scheduled_at': '0 * * * *'}}, 'source': {'image': {'image_name': 'busybox', 'tag': '1', 'registry_id': registry}}},
    'helm': {'name': 'redis', 'source': {'helm_repository': {'repository': 'https://charts.example.com', 'chart_name': 'redis', 'chart_version': '19.0.0'}}, 'arguments': [], 'auto_deploy': False, 'values_override': {}},
    'terraform': {'name': 'infra', 'terraform_files_source': {'git_repository': {'url': 'https://gitlab.com/acme/infra'}}},
}
ids = {kind: setting('POST', f'/environment/{env}/{kind}', body)['id'] for kind, body in bodies.items()}

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
call('GET', f'/environment/{env}/deploymentHistory')
call('POST', f'/environment/{env}/uninstall')
settle(f'/environment/{env}/statuses')
call('POST', f'/environment/{env}/service/delete', {'terraform_ids': [ids['terraform']]})
call('GET', f'/environment/{env}/statuses')
doomed = setting('POST', f'/project/{project}/environment', {'name': 'doomed'})['id']
call('DELETE', f'/environment/{doomed}')

print(f'public conformance: {len(checked)} operations answered, {len(failures)} failing')
sys.exit(1 if failures else 0)
