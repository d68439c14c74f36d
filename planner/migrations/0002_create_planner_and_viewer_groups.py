from django.contrib.auth.management import create_permissions
from django.db import migrations

PLANNER_PERMISSIONS = [
    "add_scenario",
    "change_scenario",
    "delete_scenario",
    "view_scenario",
    "add_modelprofile",
    "view_modelprofile",
    "view_gpuprofile",
]
VIEWER_PERMISSIONS = ["view_scenario", "view_modelprofile", "view_gpuprofile"]


def create_groups(apps, schema_editor):
    # Permissions are normally created after migrate; make sure they exist before we attach them.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in (("planner", PLANNER_PERMISSIONS), ("viewer", VIEWER_PERMISSIONS)):
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(content_type__app_label="planner", codename__in=codenames))


def remove_groups(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=["planner", "viewer"]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("planner", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_groups, remove_groups)]
