//! The parts every response body is made of: a reference by id, the id and timestamps a record
//! starts with, and a page of results.

use domain::pagination::Page;
use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Reference {
    pub id: Uuid,
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Pagination {
    pub page: u32,
    pub page_size: u32,
    pub total_count: u64,
    pub total_pages: u64,
}

#[derive(Serialize)]
pub struct Paged<T: Serialize> {
    pub results: Vec<T>,
    pub pagination: Pagination,
}

impl<T: Serialize> Paged<T> {
    pub fn from_page<R>(page: Page<R>, f: impl FnMut(R) -> T) -> Self {
        let pagination = Pagination {
            page: page.request.page(),
            page_size: page.request.page_size(),
            total_count: page.total_count,
            total_pages: page.total_pages(),
        };
        Self {
            results: page.items.into_iter().map(f).collect(),
            pagination,
        }
    }

    /// The page `request` names of a list read whole.
    pub fn from_vec<R>(
        all: Vec<R>,
        request: domain::pagination::PageRequest,
        f: impl FnMut(R) -> T,
    ) -> Self {
        Self::from_page(domain::pagination::Page::from_vec(all, request), f)
    }
}

/// The timestamps and id every record starts with.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Base {
    pub id: Uuid,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

pub(crate) fn base(id: Uuid, created_at: OffsetDateTime, updated_at: OffsetDateTime) -> Base {
    Base {
        id,
        created_at,
        updated_at,
    }
}
