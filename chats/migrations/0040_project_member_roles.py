"""Roles in a matter: ``project_members`` (the M2M table of ``Project.members``) becomes the table of a model of
its own, ``ProjectMembership``, with a ``role`` column. The table, its rows and its unique pair stay as they are
(state only); the new column gives every existing row ``member``. The owner stays ``Project.owner``."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0039_project_invitations'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ProjectMembership',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to='chats.project')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, to=settings.AUTH_USER_MODEL)),
                    ],
                    options={'db_table': 'project_members', 'unique_together': {('project', 'user')}},
                ),
                migrations.AlterField(
                    model_name='project',
                    name='members',
                    field=models.ManyToManyField(blank=True, related_name='projects', through='chats.ProjectMembership', to=settings.AUTH_USER_MODEL),
                ),
            ],
            database_operations=[],
        ),
        migrations.AddField(
            model_name='projectmembership',
            name='role',
            field=models.CharField(choices=[('owner', 'owner'), ('reviewer', 'reviewer'), ('member', 'member')], db_default='member', default='member', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='projectmembership',
            constraint=models.CheckConstraint(condition=models.Q(('role__in', ['reviewer', 'member'])), name='project_members_role_known', violation_error_message='A member\'s role is reviewer or member (the owner is the matter\'s owner).'),
        ),
    ]
