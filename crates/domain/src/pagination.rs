//! Page requests and pages, shared by every list.

use crate::error::DomainError;

pub const DEFAULT_PAGE_SIZE: u32 = 100;
pub const MAX_PAGE_SIZE: u32 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    page: u32,
    page_size: u32,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            page: 1,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

impl PageRequest {
    /// Parses the raw `page` and `page_size` query values; an error names the parameter.
    pub fn parse(page: Option<&str>, page_size: Option<&str>) -> Result<Self, DomainError> {
        let page = match page {
            None => 1,
            Some(raw) => parse_bounded("page", raw, 1, u32::MAX)?,
        };
        let page_size = match page_size {
            None => DEFAULT_PAGE_SIZE,
            Some(raw) => parse_bounded("page_size", raw, 1, MAX_PAGE_SIZE)?,
        };
        Ok(Self { page, page_size })
    }

    pub fn new(page: u32, page_size: u32) -> Result<Self, DomainError> {
        Self::parse(Some(&page.to_string()), Some(&page_size.to_string()))
    }

    /// Every item at once, for internal use where the set is known to be small.
    pub fn all() -> Self {
        Self {
            page: 1,
            page_size: MAX_PAGE_SIZE,
        }
    }

    pub fn page(&self) -> u32 {
        self.page
    }
    pub fn page_size(&self) -> u32 {
        self.page_size
    }
    pub fn offset(&self) -> i64 {
        i64::from(self.page - 1) * i64::from(self.page_size)
    }
    pub fn limit(&self) -> i64 {
        i64::from(self.page_size)
    }
}

/// A whole number from `min` to `max`. A page number past what a page can be (2^32 - 1) is
/// refused rather than read as another: the client asked for something no page is.
fn parse_bounded(name: &str, raw: &str, min: u32, max: u32) -> Result<u32, DomainError> {
    match raw.trim().parse::<u64>() {
        Ok(v) if v >= u64::from(min) && v <= u64::from(max) => Ok(v as u32),
        _ => Err(DomainError::invalid(
            name,
            format!("must be an integer between {min} and {max}"),
        )),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub request: PageRequest,
    pub total_count: u64,
}

impl<T> Page<T> {
    pub fn total_pages(&self) -> u64 {
        self.total_count.div_ceil(u64::from(self.request.page_size))
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            request: self.request,
            total_count: self.total_count,
        }
    }

    /// Pages an in-memory list (for lists whose source is not a table).
    pub fn from_vec(all: Vec<T>, request: PageRequest) -> Self {
        let total_count = all.len() as u64;
        let items = all
            .into_iter()
            .skip(request.offset() as usize)
            .take(request.page_size as usize)
            .collect();
        Self {
            items,
            request,
            total_count,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_apply_when_absent() {
        let p = PageRequest::parse(None, None).unwrap();
        assert_eq!((p.page(), p.page_size()), (1, 100));
        assert_eq!(p.offset(), 0);
    }

    #[test]
    fn bounds_are_enforced_and_named() {
        for (page, size, field) in [
            (Some("0"), None, "page"),
            (Some("-1"), None, "page"),
            (Some("abc"), None, "page"),
            (None, Some("0"), "page_size"),
            (None, Some("1001"), "page_size"),
            (None, Some("1.5"), "page_size"),
        ] {
            match PageRequest::parse(page, size) {
                Err(DomainError::Invalid { field: f, .. }) => assert_eq!(f, field),
                other => panic!("expected invalid {field}, got {other:?}"),
            }
        }
        let p = PageRequest::parse(Some("3"), Some("1000")).unwrap();
        assert_eq!(p.offset(), 2000);
        // The largest page number is past the end; one past it is no page at all.
        let far = PageRequest::parse(Some("4294967295"), None).unwrap();
        assert_eq!(far.page(), u32::MAX);
        for huge in ["4294967296", "99999999999999999999999"] {
            match PageRequest::parse(Some(huge), None) {
                Err(DomainError::Invalid { field, .. }) => assert_eq!(field, "page"),
                other => panic!("expected invalid page, got {other:?}"),
            }
        }
    }

    #[test]
    fn total_pages_rounds_up() {
        let page: Page<u8> = Page::from_vec(vec![1, 2, 3, 4, 5], PageRequest::new(2, 2).unwrap());
        assert_eq!(page.items, vec![3, 4]);
        assert_eq!(page.total_pages(), 3);
        let past: Page<u8> = Page::from_vec(vec![1], PageRequest::new(5, 2).unwrap());
        assert!(past.items.is_empty());
        assert_eq!(past.total_count, 1);
    }
}
