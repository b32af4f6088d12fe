//! What the gateway knows beyond the listings when it builds a catalog: which upstreams serve resources, how a
//! quarantined tool looks, and which upstream wins a name two of them list. Data only; the build is the catalog's.

use toolgate_spec::Quarantine;

/// What the gateway knows beyond the listings when it builds a catalog.
#[derive(Debug, Clone, Default)]
pub struct CatalogContext {
    /// Upstreams that declared the resources capability (unlisted URIs go to the only one).
    pub resource_servers: Vec<usize>,
    /// What a quarantined tool looks like.
    pub quarantine: Quarantine,
    /// Name precedence: upstream indices, the first wins a name; the ones it leaves out follow in index order.
    pub precedence: Vec<usize>,
}

/// The order in which a catalog build visits `len` upstreams: `precedence` (indices, first wins a name; any out of
/// range or repeated is skipped), then every one it leaves out, in index order. Each is visited exactly once.
pub(crate) fn visiting_order(precedence: &[usize], len: usize) -> Vec<usize> {
    let mut seen = vec![false; len];
    let mut order = Vec::with_capacity(len);
    for index in precedence.iter().copied().chain(0..len) {
        if let Some(visited) = seen.get_mut(index)
            && !*visited
        {
            *visited = true;
            order.push(index);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::visiting_order;

    #[test]
    fn every_upstream_is_visited_once_in_precedence_then_index_order() {
        assert_eq!(visiting_order(&[2, 1], 3), [2, 1, 0], "one left out is still visited, last");
        assert_eq!(visiting_order(&[5, 1, 1], 2), [1, 0], "out of range and repeated indices are skipped");
        assert_eq!(visiting_order(&[], 2), [0, 1], "no precedence: index order");
    }
}
