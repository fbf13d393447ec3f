import { Body, Controller, Get, Param, Patch, Post, Put, Query, UseInterceptors } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiTags } from '@nestjs/swagger';
import {
  ApiAuthenticated,
  ApiErrors,
  ApiIdempotencyKey,
  ApiPageResponse,
  ApiProjectParam,
} from '../../common/openapi/api-docs';
import { Access, CurrentPrincipal, Principal } from '../../common/auth/principal';
import { IdempotencyKey } from '../../common/idempotency/idempotency-key.decorator';
import { Page, PageQueryDto } from '../../common/pagination/cursor';
import { CreateProjectDto, ProjectView, SetMembersDto, UpdateProjectDto } from './dto/project.dto';
import { ProjectsService } from './projects.service';
import { ReadRetryInterceptor } from '../../infra/database/read-retry';

@ApiTags('projects')
@ApiAuthenticated()
@UseInterceptors(ReadRetryInterceptor)
@Controller('api/v1/projects')
@Access('user')
export class ProjectsController {
  constructor(private readonly projects: ProjectsService) {}

  /** The creator becomes the project's admin. */
  @Post()
  @ApiCreatedResponse({ type: ProjectView })
  @ApiIdempotencyKey()
  @ApiErrors(400, 409, 413)
  create(
    @CurrentPrincipal() p: Principal,
    @Body() body: CreateProjectDto,
    @IdempotencyKey() key?: string,
  ): Promise<ProjectView> {
    return this.projects.create(p, body, key);
  }

  @Get()
  @ApiPageResponse(ProjectView, 'Projects the caller is a member of (admins: all).')
  @ApiErrors(400)
  list(@CurrentPrincipal() p: Principal, @Query() q: PageQueryDto): Promise<Page<ProjectView>> {
    return this.projects.list(p, q.limit, q.cursor);
  }

  @Get(':project')
  @ApiProjectParam()
  @ApiOkResponse({ type: ProjectView })
  @ApiErrors(400, 404)
  get(@CurrentPrincipal() p: Principal, @Param('project') project: string): Promise<ProjectView> {
    return this.projects.get(p, project);
  }

  /** Project admins change the billing limit: only fields present change; `null` removes the limit. */
  @Patch(':project')
  @ApiProjectParam()
  @ApiOkResponse({ type: ProjectView })
  @ApiErrors(400, 404, 413)
  update(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Body() body: UpdateProjectDto,
  ): Promise<ProjectView> {
    return this.projects.update(p, project, body);
  }

  /** Replaces the whole member list; project admins only. */
  @Put(':project/members')
  @ApiProjectParam()
  @ApiOkResponse({ type: ProjectView })
  @ApiErrors(400, 404, 413)
  setMembers(
    @CurrentPrincipal() p: Principal,
    @Param('project') project: string,
    @Body() body: SetMembersDto,
  ): Promise<ProjectView> {
    return this.projects.setMembers(p, project, body.members);
  }
}
