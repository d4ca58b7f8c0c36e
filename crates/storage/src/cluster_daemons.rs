//! Which Docker daemon each cluster naming an endpoint was deployed on, and who this
//! installation is on the daemons it shares.

use crate::db::{db_run, store_error};
use crate::schema::cluster_daemons as cd;
use crate::schema::installation;
use crate::session::Session;
use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use domain::error::StoreResult;
use domain::ids::{ClusterId, OrganizationId};
use domain::model::{ClaimedDaemon, DockerHostKind};
use domain::ports::DaemonClaims;

#[async_trait]
impl DaemonClaims for Session {
    async fn daemon_organizations(&mut self, daemon: &str) -> StoreResult<Vec<OrganizationId>> {
        let daemon = daemon.to_string();
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| cd::table
            .filter(cd::daemon_id.eq(daemon.clone()))
            .select(cd::organization_id)
            .distinct()
            .load(c)
            .await)
        .map_err(store_error)
    }

    async fn set_cluster_daemon(
        &mut self,
        cluster: ClusterId,
        organization: OrganizationId,
        daemon: &ClaimedDaemon,
    ) -> StoreResult<()> {
        let (id, kind) = (daemon.id.clone(), daemon.kind);
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::insert_into(cd::table)
            .values((
                cd::cluster_id.eq(cluster),
                cd::organization_id.eq(organization),
                cd::daemon_id.eq(id.clone()),
                cd::kind.eq(kind),
            ))
            .on_conflict(cd::cluster_id)
            .do_update()
            .set((cd::daemon_id.eq(id.clone()), cd::kind.eq(kind)))
            .execute(c)
            .await)
        .map_err(store_error)?;
        Ok(())
    }

    async fn cluster_daemons(
        &mut self,
        clusters: &[ClusterId],
    ) -> StoreResult<Vec<(ClusterId, ClaimedDaemon)>> {
        if clusters.is_empty() {
            return Ok(Vec::new());
        }
        let clusters = clusters.to_vec();
        let (conn, _) = self.parts()?;
        let rows: Vec<(ClusterId, String, DockerHostKind)> = db_run!(*conn, |c| cd::table
            .filter(cd::cluster_id.eq_any(clusters.clone()))
            .select((cd::cluster_id, cd::daemon_id, cd::kind))
            .load(c)
            .await)
        .map_err(store_error)?;
        Ok(rows
            .into_iter()
            .map(|(cluster, id, kind)| (cluster, ClaimedDaemon { id, kind }))
            .collect())
    }

    async fn installation_id(&mut self, proposed: &str) -> StoreResult<String> {
        let proposed = proposed.to_string();
        let (conn, _) = self.parts()?;
        db_run!(*conn, |c| diesel::insert_into(installation::table)
            .values((
                installation::singleton.eq(1),
                installation::id.eq(proposed.clone())
            ))
            .on_conflict_do_nothing()
            .execute(c)
            .await)
        .map_err(store_error)?;
        db_run!(*conn, |c| installation::table
            .select(installation::id)
            .first(c)
            .await)
        .map_err(store_error)
    }
}
