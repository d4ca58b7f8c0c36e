//! One portable schema for both backends: ids as text, timestamps in UTC.

diesel::table! {
    organizations (id) {
        id -> Text,
        name -> Text,
        description -> Nullable<Text>,
        plan -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        description -> Nullable<Text>,
        role -> Text,
        token_hash -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        last_used_at -> Nullable<Timestamp>,
    }
}

diesel::table! {
    cloud_credentials (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        name_key -> Text,
        access_key_id -> Text,
        secret_access_key -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        details -> Text,
    }
}

diesel::table! {
    clusters (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        name_key -> Text,
        description -> Nullable<Text>,
        region -> Text,
        cloud_provider -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        spec -> Text,
        advanced_settings -> Text,
        state -> Text,
        deployment_status -> Text,
        state_reason -> Nullable<Text>,
        queued_at -> Nullable<Timestamp>,
        last_deployment_date -> Nullable<Timestamp>,
        last_execution_id -> Nullable<Text>,
        claimed_by -> Nullable<Text>,
        lease_until -> Nullable<Timestamp>,
    }
}

diesel::table! {
    projects (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        name_key -> Text,
        description -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    environments (id) {
        id -> Text,
        organization_id -> Text,
        project_id -> Text,
        cluster_id -> Text,
        name -> Text,
        name_key -> Text,
        mode -> Text,
        last_updated_by -> Nullable<Text>,
        pull_request -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    container_registries (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        name_key -> Text,
        kind -> Text,
        url -> Text,
        description -> Nullable<Text>,
        cluster_id -> Nullable<Text>,
        config -> Text,
        secret_config -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    git_tokens (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        name_key -> Text,
        provider -> Text,
        token -> Text,
        description -> Nullable<Text>,
        workspace -> Nullable<Text>,
        git_api_url -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        expired_at -> Nullable<Text>,
    }
}

diesel::table! {
    services (id) {
        id -> Text,
        organization_id -> Text,
        project_id -> Text,
        environment_id -> Text,
        kind -> Text,
        name -> Text,
        name_key -> Text,
        description -> Nullable<Text>,
        spec -> Text,
        registry_id -> Nullable<Text>,
        git_token_id -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        deployment_status -> Text,
        helm_repository_id -> Nullable<Text>,
        advanced_settings -> Text,
    }
}

diesel::table! {
    helm_repositories (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        name_key -> Text,
        kind -> Text,
        url -> Text,
        description -> Nullable<Text>,
        skip_tls_verification -> Bool,
        config -> Text,
        secret_config -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    variables (id) {
        id -> Text,
        organization_id -> Text,
        project_id -> Text,
        environment_id -> Nullable<Text>,
        service_id -> Nullable<Text>,
        parent_id -> Text,
        scope -> Text,
        key -> Text,
        value -> Nullable<Text>,
        is_secret -> Bool,
        variable_type -> Text,
        mount_path -> Nullable<Text>,
        description -> Nullable<Text>,
        enable_interpolation_in_file -> Nullable<Bool>,
        aliased_variable_id -> Nullable<Text>,
        overridden_variable_id -> Nullable<Text>,
        secret_manager_access_id -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        linked_database_id -> Nullable<Text>,
    }
}

diesel::table! {
    deployment_requests (id) {
        id -> Text,
        organization_id -> Text,
        environment_id -> Text,
        service_id -> Text,
        action -> Text,
        requested_by -> Text,
        git_commit_id -> Nullable<Text>,
        image_tag -> Nullable<Text>,
        chart_version -> Nullable<Text>,
        status -> Text,
        reason -> Nullable<Text>,
        claimed_by -> Nullable<Text>,
        created_at -> Timestamp,
        started_at -> Nullable<Timestamp>,
        finished_at -> Nullable<Timestamp>,
        state -> Text,
        batch_id -> Text,
        snapshot -> Text,
        steps -> Text,
        lease_until -> Nullable<Timestamp>,
        cancel_requested -> Bool,
        position -> Integer,
        origin -> Text,
    }
}

diesel::table! {
    installation (singleton) {
        singleton -> Integer,
        id -> Text,
    }
}

diesel::table! {
    cluster_daemons (cluster_id) {
        cluster_id -> Text,
        organization_id -> Text,
        daemon_id -> Text,
        kind -> Text,
    }
}

diesel::table! {
    cluster_logs (cluster_id, position) {
        cluster_id -> Text,
        position -> BigInt,
        created_at -> Timestamp,
        step -> Text,
        level -> Text,
        message -> Text,
    }
}

diesel::table! {
    deployment_logs (request_id, position) {
        request_id -> Text,
        position -> BigInt,
        environment_id -> Text,
        service_id -> Text,
        created_at -> Timestamp,
        step -> Text,
        level -> Text,
        message -> Text,
    }
}

diesel::table! {
    service_output (service_id, replica, position) {
        service_id -> Text,
        replica -> Text,
        position -> BigInt,
        id -> Text,
        environment_id -> Text,
        request_id -> Nullable<Text>,
        version -> Text,
        created_at -> Timestamp,
        stream -> Text,
        message -> Text,
    }
}

diesel::table! {
    database_backups (id) {
        id -> Text,
        organization_id -> Text,
        database_id -> Text,
        name -> Text,
        message -> Text,
        state -> Text,
        size_bytes -> BigInt,
        reason -> Nullable<Text>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    cron_turns (service_id) {
        service_id -> Text,
        environment_id -> Text,
        next_run_at -> Timestamp,
    }
}

diesel::table! {
    running_states (service_id) {
        service_id -> Text,
        environment_id -> Text,
        state -> Text,
        replicas -> Text,
        endpoints -> Text,
        observed_at -> Timestamp,
    }
}

diesel::table! {
    deployment_stages (id) {
        id -> Text,
        organization_id -> Text,
        environment_id -> Text,
        name -> Text,
        name_key -> Text,
        description -> Nullable<Text>,
        deployment_order -> Integer,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    deployment_stage_services (service_id) {
        service_id -> Text,
        id -> Text,
        stage_id -> Text,
        environment_id -> Text,
        is_skipped -> Bool,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    organization_members (organization_id, user_id) {
        organization_id -> Text,
        user_id -> Text,
        role -> Text,
        created_at -> Timestamp,
        email -> Nullable<Text>,
        owner -> Bool,
    }
}

diesel::table! {
    invitations (id) {
        id -> Text,
        organization_id -> Text,
        email -> Text,
        email_key -> Text,
        role -> Text,
        inviter -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
        expires_at -> Timestamp,
    }
}

diesel::table! {
    rate_limits (key) {
        key -> Text,
        tat -> BigInt,
    }
}

diesel::table! {
    idempotency_keys (principal, key) {
        principal -> Text,
        key -> Text,
        request_hash -> Text,
        status -> Nullable<Integer>,
        response_body -> Nullable<Text>,
        created_at -> Timestamp,
    }
}

diesel::table! {
    deployment_restrictions (id) {
        id -> Text,
        organization_id -> Text,
        service_id -> Text,
        mode -> Text,
        restriction_type -> Text,
        value -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    custom_domains (id) {
        id -> Text,
        organization_id -> Text,
        service_id -> Text,
        domain -> Text,
        generate_certificate -> Bool,
        use_cdn -> Bool,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    metadata_groups (id) {
        id -> Text,
        organization_id -> Text,
        kind -> Text,
        name -> Text,
        name_key -> Text,
        entries -> Text,
        scopes -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    service_metadata_groups (service_id, group_id) {
        service_id -> Text,
        group_id -> Text,
    }
}

diesel::table! {
    project_deployment_rules (id) {
        id -> Text,
        organization_id -> Text,
        project_id -> Text,
        name -> Text,
        name_key -> Text,
        description -> Nullable<Text>,
        mode -> Text,
        cluster_id -> Text,
        wildcard -> Text,
        priority_index -> Integer,
        auto_stop -> Bool,
        timezone -> Text,
        start_time -> Text,
        stop_time -> Text,
        weekdays -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    environment_deployment_rules (id) {
        id -> Text,
        organization_id -> Text,
        on_demand_preview -> Bool,
        auto_preview -> Bool,
        auto_stop -> Bool,
        timezone -> Text,
        start_time -> Text,
        stop_time -> Text,
        weekdays -> Text,
        next_turn_at -> Nullable<Timestamp>,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    events (id) {
        id -> Text,
        organization_id -> Text,
        position -> Nullable<BigInt>,
        created_at -> Timestamp,
        event_type -> Nullable<Text>,
        target_type -> Text,
        target_id -> Nullable<Text>,
        sub_target_type -> Nullable<Text>,
        origin -> Text,
        triggered_by -> Text,
        project_id -> Nullable<Text>,
        environment_id -> Nullable<Text>,
        body -> Text,
    }
}

diesel::table! {
    organization_webhooks (id) {
        id -> Text,
        organization_id -> Text,
        kind -> Text,
        target_url -> Text,
        target_secret -> Nullable<Text>,
        description -> Nullable<Text>,
        enabled -> Bool,
        events -> Text,
        project_names_filter -> Text,
        environment_types_filter -> Text,
        created_at -> Timestamp,
        updated_at -> Timestamp,
    }
}

diesel::table! {
    webhook_deliveries (id) {
        id -> Text,
        webhook_id -> Text,
        organization_id -> Text,
        event_id -> Text,
        matched_event -> Text,
        payload -> Text,
        state -> Text,
        attempts -> Integer,
        next_attempt_at -> Timestamp,
        claimed_by -> Nullable<Text>,
        lease_until -> Nullable<Timestamp>,
        created_at -> Timestamp,
    }
}

diesel::table! {
    webhook_attempts (id) {
        id -> Text,
        delivery_id -> Text,
        webhook_id -> Text,
        organization_id -> Text,
        created_at -> Timestamp,
        kind -> Text,
        matched_event -> Text,
        target_url -> Text,
        request -> Text,
        status_code -> Integer,
        response_body -> Nullable<Text>,
        error -> Nullable<Text>,
        duration_ms -> BigInt,
        attempt -> Integer,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    events,
    organization_webhooks,
    webhook_deliveries,
    webhook_attempts,
    project_deployment_rules,
    environment_deployment_rules,
    metadata_groups,
    service_metadata_groups,
    custom_domains,
    deployment_restrictions,
    organization_members,
    invitations,
    helm_repositories,
    deployment_requests,
    deployment_stages,
    deployment_stage_services,
    organizations,
    api_tokens,
    cloud_credentials,
    clusters,
    projects,
    environments,
    container_registries,
    git_tokens,
    services,
    variables,
    database_backups,
);
