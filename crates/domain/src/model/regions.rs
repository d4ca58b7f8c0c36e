//! The regions each cloud provider offers: a static catalog, as the providers publish them.

use super::CloudProvider;
use serde::Serialize;

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Region {
    pub name: &'static str,
    pub country_code: &'static str,
    pub country: &'static str,
    pub city: &'static str,
    pub arm_supported: bool,
    pub zones: Vec<String>,
}

type Row = (&'static str, &'static str, &'static str, &'static str, bool);
type Catalog = &'static [(Row, &'static [&'static str])];
/// How a provider names a zone from its region and suffix.
type ZoneName = fn(&str, &str) -> String;

/// cloudA: zones are the region name with a letter suffix.
const CLOUDA: Catalog = &[
    (
        ("us-east-1", "US", "United States", "N. Virginia", true),
        &["a", "b", "c", "d", "e", "f"],
    ),
    (
        ("us-east-2", "US", "United States", "Ohio", true),
        &["a", "b", "c"],
    ),
    (
        ("us-west-1", "US", "United States", "N. California", true),
        &["a", "b"],
    ),
    (
        ("us-west-2", "US", "United States", "Oregon", true),
        &["a", "b", "c", "d"],
    ),
    (
        ("ca-central-1", "CA", "Canada", "Montreal", true),
        &["a", "b", "d"],
    ),
    (
        ("sa-east-1", "BR", "Brazil", "Sao Paulo", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-west-1", "IE", "Ireland", "Dublin", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-west-2", "GB", "United Kingdom", "London", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-west-3", "FR", "France", "Paris", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-central-1", "DE", "Germany", "Frankfurt", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-central-2", "CH", "Switzerland", "Zurich", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-north-1", "SE", "Sweden", "Stockholm", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-south-1", "IT", "Italy", "Milan", true),
        &["a", "b", "c"],
    ),
    (
        ("eu-south-2", "ES", "Spain", "Aragon", true),
        &["a", "b", "c"],
    ),
    (
        ("ap-south-1", "IN", "India", "Mumbai", true),
        &["a", "b", "c"],
    ),
    (
        ("ap-northeast-1", "JP", "Japan", "Tokyo", true),
        &["a", "c", "d"],
    ),
    (
        ("ap-northeast-2", "KR", "South Korea", "Seoul", true),
        &["a", "b", "c", "d"],
    ),
    (
        ("ap-northeast-3", "JP", "Japan", "Osaka", true),
        &["a", "b", "c"],
    ),
    (
        ("ap-southeast-1", "SG", "Singapore", "Singapore", true),
        &["a", "b", "c"],
    ),
    (
        ("ap-southeast-2", "AU", "Australia", "Sydney", true),
        &["a", "b", "c"],
    ),
    (
        ("ap-east-1", "HK", "Hong Kong", "Hong Kong", true),
        &["a", "b", "c"],
    ),
    (
        ("me-south-1", "BH", "Bahrain", "Manama", true),
        &["a", "b", "c"],
    ),
    (
        ("af-south-1", "ZA", "South Africa", "Cape Town", true),
        &["a", "b", "c"],
    ),
];

/// altcloud: zones are the region name with a number suffix.
const ALTCLOUD: Catalog = &[
    (("fr-par", "FR", "France", "Paris", true), &["1", "2", "3"]),
    (
        ("nl-ams", "NL", "Netherlands", "Amsterdam", true),
        &["1", "2", "3"],
    ),
    (
        ("pl-waw", "PL", "Poland", "Warsaw", false),
        &["1", "2", "3"],
    ),
];

/// cloudC: zones are numbered; regions without availability zones have none.
const CLOUDC: Catalog = &[
    (
        ("eastus", "US", "United States", "Virginia", true),
        &["1", "2", "3"],
    ),
    (
        ("eastus2", "US", "United States", "Virginia", true),
        &["1", "2", "3"],
    ),
    (
        ("centralus", "US", "United States", "Iowa", true),
        &["1", "2", "3"],
    ),
    (
        ("westus2", "US", "United States", "Washington", true),
        &["1", "2", "3"],
    ),
    (
        ("westus3", "US", "United States", "Arizona", true),
        &["1", "2", "3"],
    ),
    (
        ("canadacentral", "CA", "Canada", "Toronto", true),
        &["1", "2", "3"],
    ),
    (
        ("brazilsouth", "BR", "Brazil", "Sao Paulo State", true),
        &["1", "2", "3"],
    ),
    (
        ("northeurope", "IE", "Ireland", "Dublin", true),
        &["1", "2", "3"],
    ),
    (
        ("westeurope", "NL", "Netherlands", "Amsterdam", true),
        &["1", "2", "3"],
    ),
    (
        ("uksouth", "GB", "United Kingdom", "London", true),
        &["1", "2", "3"],
    ),
    (
        ("francecentral", "FR", "France", "Paris", true),
        &["1", "2", "3"],
    ),
    (
        ("germanywestcentral", "DE", "Germany", "Frankfurt", true),
        &["1", "2", "3"],
    ),
    (
        ("swedencentral", "SE", "Sweden", "Gavle", true),
        &["1", "2", "3"],
    ),
    (
        ("switzerlandnorth", "CH", "Switzerland", "Zurich", true),
        &["1", "2", "3"],
    ),
    (
        ("centralindia", "IN", "India", "Pune", true),
        &["1", "2", "3"],
    ),
    (
        ("japaneast", "JP", "Japan", "Tokyo", true),
        &["1", "2", "3"],
    ),
    (
        ("koreacentral", "KR", "South Korea", "Seoul", true),
        &["1", "2", "3"],
    ),
    (
        ("southeastasia", "SG", "Singapore", "Singapore", true),
        &["1", "2", "3"],
    ),
    (
        ("australiaeast", "AU", "Australia", "New South Wales", true),
        &["1", "2", "3"],
    ),
    (
        (
            "southafricanorth",
            "ZA",
            "South Africa",
            "Johannesburg",
            true,
        ),
        &["1", "2", "3"],
    ),
    (("westus", "US", "United States", "California", false), &[]),
];

/// One's own machines are where they are: one region stands for them all.
const ON_PREMISE: Catalog = &[(
    ("on-premise", "ZZ", "Anywhere", "Your own machines", true),
    &[],
)];

/// The regions of `provider`, in the catalog's order.
pub fn regions(provider: CloudProvider) -> Vec<Region> {
    let (rows, zone): (Catalog, ZoneName) = match provider {
        CloudProvider::CloudA => (CLOUDA, |region, z| format!("{region}{z}")),
        CloudProvider::AltCloud => (ALTCLOUD, |region, z| format!("{region}-{z}")),
        CloudProvider::CloudC => (CLOUDC, |_, z| z.to_string()),
        CloudProvider::OnPremise => (ON_PREMISE, |_, z| z.to_string()),
    };
    rows.iter()
        .map(
            |((name, country_code, country, city, arm_supported), zones)| Region {
                name,
                country_code,
                country,
                city,
                arm_supported: *arm_supported,
                zones: zones.iter().map(|z| zone(name, z)).collect(),
            },
        )
        .collect()
}

/// Whether `region` is one `provider` offers.
pub fn is_region(provider: CloudProvider, region: &str) -> bool {
    regions(provider).iter().any(|r| r.name == region)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogs_are_complete_and_zoned() {
        for provider in CloudProvider::ALL {
            let all = regions(*provider);
            assert!(!all.is_empty());
            let mut names: Vec<_> = all.iter().map(|r| r.name).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), all.len(), "{provider:?} names are unique");
            for r in &all {
                assert_eq!(r.country_code.len(), 2);
                assert!(!r.city.is_empty());
            }
        }
        let par = &regions(CloudProvider::AltCloud)[0];
        assert_eq!(par.zones, ["fr-par-1", "fr-par-2", "fr-par-3"]);
        assert!(regions(CloudProvider::CloudA)
            .iter()
            .any(|r| r.name == "eu-west-3" && r.zones[0] == "eu-west-3a"));
        assert!(is_region(CloudProvider::CloudC, "westeurope"));
        assert!(!is_region(CloudProvider::CloudC, "eu-west-3"));
    }
}
