-- Host names clients reach a service at: unique across the installation.
CREATE TABLE custom_domains (
    id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
    service_id TEXT NOT NULL REFERENCES services(id) ON DELETE CASCADE,
    domain TEXT NOT NULL UNIQUE,
    generate_certificate BOOLEAN NOT NULL,
    use_cdn BOOLEAN NOT NULL,
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE INDEX custom_domains_service ON custom_domains(service_id);
