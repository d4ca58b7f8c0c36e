"""Checks Capstan's answers to the specification's operations against the public API's own
OpenAPI description (../shared/reference/public-api-subset.yaml): what real clients expect.
    python3 tests/reference_conformance.py BASE_URL TOKEN REFERENCE_YAML
"""
import json, sys, yaml, urllib.request
from jsonschema import Draft7Validator
ref = yaml.safe_load(open(sys.argv[3]))
schemas = ref['components']['schemas']
def conv(s):
    if isinstance(s, dict):
        s = {k: conv(v) for k, v in s.items() if not k.startswith('x-')}
        if '$ref' in s:
            return {'$ref': '#/definitions/' + s['$ref'].split('/')[-1]}
        if s.get('nullable'):
            s.pop('nullable')
            if 'type' in s: s['type'] = [s['type'], 'null']
            elif 'enum' in s: s['enum'] = s['enum'] + [None]
            else: s = {'anyOf': [s, {'type': 'null'}]}
        if s.get('format') == 'uu': s.pop('format')
        s.pop('discriminator', None); s.pop('example', None)
        return s
    if isinstance(s, list): return [conv(x) for x in s]
    return s
defs = {k: conv(v) for k, v in schemas.items()}
BASE = sys.argv[1]; TOKEN = sys.argv[2]
def get(method, path, body=None):
    req = urllib.request.Request(BASE + path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={'Authorization': 'Token ' + TOKEN, 'Content-Type': 'application/json'})
    try:
        with urllib.request.urlopen(req) as r: return r.status, json.loads(r.read() or b'null')
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read() or b'null')
failures = []
def check(name, schema_name, value):
    v = Draft7Validator({'definitions': defs, '$ref': '#/definitions/' + schema_name})
    errs = list(v.iter_errors(value))
    print(('ok   ' if not errs else 'FAIL ') + name + ' against ' + schema_name)
    for e in errs[:5]: print('     ', list(e.absolute_path), e.message[:200])
    if errs: failures.append(name)
st, orgs = get('GET', '/organization'); org = orgs['results'][0]['id']
st, c = get('POST', f'/organization/{org}/cluster', {'name': 'main', 'region': 'eu-west-3', 'cloud_provider': 'CLOUDA'})
st, p = get('POST', f'/organization/{org}/project', {'name': 'shop'})
st, e = get('POST', f'/project/{p["id"]}/environment', {'name': 'prod'})
env = e['id']
st, gt = get('POST', f'/organization/{org}/gitToken', {'name': 'gh', 'type': 'HOSTA', 'token': 'x'})
st, reg = get('POST', f'/organization/{org}/containerRegistry', {'name': 'hub', 'kind': 'DOCKER_HUB', 'cluster_id': c['id'], 'config': {'username': 'u', 'password': 'p'}})
st, cont = get('POST', f'/environment/{env}/container', {'name': 'web', 'registry_id': reg['id'], 'image_name': 'nginx', 'tag': '1'})
st, app = get('POST', f'/environment/{env}/application', {'name': 'api', 'git_repository': {'url': 'https://github.com/a/b', 'git_token_id': gt['id']}})
git = {'url': 'https://github.com/a/charts', 'git_token_id': gt['id']}
get('POST', f'/environment/{env}/helm', {'name': 'h1', 'source': {'git_repository': git}, 'arguments': ['--x'], 'auto_deploy': True,
    'values_override': {'set': [['a','b']], 'file': {'raw': {'values': [{'name': 'v', 'content': 'c'}]}, 'git': {'git_repository': git, 'paths': ['/v.yaml']}}},
    'ports': [{'internal_port': 80, 'service_name': 'web'}]})
get('POST', f'/environment/{env}/helm', {'name': 'h2', 'source': {'helm_repository': {'repository': 'https://charts.x.io', 'chart_name': 'redis', 'chart_version': '1'}}, 'arguments': [], 'auto_deploy': False, 'values_override': {}})
st, helms = get('GET', f'/environment/{env}/helm'); check('1 list helms', 'HelmResponseList', helms)
st, pv = get('POST', f'/project/{p["id"]}/environmentVariable', {'key': 'P', 'value': 'p'})
st, v = get('POST', f'/container/{cont["id"]}/environmentVariable', {'key': 'K', 'value': 'v', 'description': 'd'}); check('2 create var ' + str(st), 'EnvironmentVariable', v)
st, ov = get('POST', f'/variable/{pv["id"]}/override', {'value': 'x', 'override_scope': 'CONTAINER', 'override_parent_id': cont['id']})
st, al = get('POST', f'/variable/{pv["id"]}/alias', {'key': 'AL', 'alias_scope': 'CONTAINER', 'alias_parent_id': cont['id']})
st, lv = get('GET', f'/container/{cont["id"]}/environmentVariable')
for x in lv['results']: check('2b listed var ' + x['variable_type'], 'EnvironmentVariable', x)
st, ed = get('PUT', f'/variable/{v["id"]}', {'key': 'K2', 'value': 'v2'}); check('3 edit var ' + str(st), 'VariableResponse', ed)
st, sec = get('POST', f'/container/{cont["id"]}/secret', {'key': 'S', 'value': 's'})
st, eds = get('PUT', f'/variable/{sec["id"]}', {'key': 'S', 'value': 's2'}); check('3 edit secret', 'VariableResponse', eds)
st, ed2 = get('PUT', f'/variable/{ov["id"]}', {'key': 'P', 'value': 'y'}); check('3 edit override', 'VariableResponse', ed2)
st, cl = get('POST', f'/environment/{env}/clone', {'name': 'copy'}); check('4 clone ' + str(st), 'Environment', cl)
st, regs = get('GET', f'/organization/{org}/containerRegistry'); check('5 registries', 'ContainerRegistryResponseList', regs)
get('POST', f'/application/{app["id"]}/secret', {'key': 'AS', 'value': 'x'})
get('POST', f'/project/{p["id"]}/secret', {'key': 'PS', 'value': 'x'})
st, ps = get('POST', f'/project/{p["id"]}/secret', {'key': 'PS2', 'value': 'x'})
get('POST', f'/variable/{ps["id"]}/alias', {'key': 'PSA', 'alias_scope': 'APPLICATION', 'alias_parent_id': app['id']})
get('POST', f'/variable/{ps["id"]}/override', {'value': 'y', 'override_scope': 'APPLICATION', 'override_parent_id': app['id']})
st, secs = get('GET', f'/application/{app["id"]}/secret'); check('6 app secrets', 'SecretResponseList', secs)
st, assoc = get('GET', f'/organization/{org}/gitToken/{gt["id"]}/associatedServices'); check('12 associated', 'GitTokenAssociatedServicesResponseList', assoc)
st, regions = get('GET', '/altcloud/region'); check('13 regions', 'ClusterRegionResponseList', regions)
st, cr = get('POST', f'/organization/{org}/cloudA/credentials', {'name': 'a', 'access_key_id': 'AK', 'secret_access_key': 's'})
st, crg = get('GET', f'/organization/{org}/cloudA/credentials/{cr["id"]}'); check('14 credentials', 'AwsStaticClusterCredentials', crg)

import time
def settle(path):
    for _ in range(500):
        st, s = get('GET', path)
        if s.get('deployment_requests_count') == 0: return s
        time.sleep(0.02)
    failures.append('settle ' + path); return s
def accepted(name, st, body, schema='Status'):
    if st != 202: print(f'FAIL {name}: status {st} {body}'); failures.append(name)
    check(name, schema, body)
st, d = get('POST', f'/application/{app["id"]}/deploy', {'git_commit_id': 'a1b2c3'}); accepted('7 deploy application', st, d)
check('7 settled status', 'Status', settle(f'/application/{app["id"]}/status'))
st, h2 = get('GET', f'/environment/{env}/helm')
helm = [h for h in h2['results'] if h['name'] == 'h2'][0]
st, rd = get('POST', f'/helm/{helm["id"]}/redeploy?forceEvent=DIFF'); accepted('8 helm redeploy DIFF', st, rd)
st, rd = get('POST', f'/helm/{helm["id"]}/redeploy'); accepted('8 helm redeploy', st, rd)
settle(f'/helm/{helm["id"]}/status')
st, sts = get('GET', f'/environment/{env}/application/status'); check('9 application statuses', 'ReferenceObjectStatusResponseList', sts)
st, dc = get('POST', f'/container/{cont["id"]}/deploy'); accepted('10 deploy container first', st, dc)
settle(f'/container/{cont["id"]}/status')
st, rb = get('POST', f'/container/{cont["id"]}/restart-service'); accepted('10 reboot container', st, rb)
settle(f'/container/{cont["id"]}/status')
st, hist = get('GET', f'/container/{cont["id"]}/deploymentHistory')
check('11 container history', 'PaginationData', hist)
for x in hist.get('results', []): check('11 history item', 'DeploymentHistoryContainer', x)
if not hist.get('results'): failures.append('11 empty history')

st, wh = get('GET', f'/service/{app["id"]}/gitWebhookStatus'); check('15 git webhook status ' + str(st), 'GitWebhookStatusResponse', wh)

print(f"reference conformance: {15 - len(failures)} operations checked clean, {len(failures)} failing")
sys.exit(1 if failures else 0)
